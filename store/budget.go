package store

// A list or a remote claim reads rows until a byte budget is spent, not
// only up to a count: a page of 1,000 jobs at the payload caps (1 MiB of
// args, 1 MiB of result, their errors) is gigabytes, and the rows a
// query returns are held in memory until the API has sent them.

// rowOverheadBytes is what a job or DLQ entry takes on the wire beside
// its payloads and names: ids, numbers, times and field names.
const (
	rowOverheadBytes = 512
	rowOverheadText  = "512"
)

// WireBytes estimates how many bytes j takes in an API answer: its JSON
// payloads, its strings and a fixed overhead. JSON payloads are sent as
// they are stored, so the estimate is close; the API, which encodes the
// answer, keeps the exact count.
func (j *Job) WireBytes() int {
	return rowOverheadBytes + len(j.Args) + len(j.Result) + len(j.Errors) + len(j.Inputs) +
		len(j.Tenant) + len(j.Kind) + len(j.Queue) + len(j.State) + len(j.Node) + len(j.UniqueKey) +
		len(j.CronEntry) + len(j.Step) + len(j.FairnessKey) + len(j.LimitKey) + len(j.TraceParent) + len(j.TraceState) + len(j.SequenceKey) + tagsBytes(j.Tags)
}

// tagsBytes is about what tags take as a JSON array.
func tagsBytes(tags []string) int {
	n := 0
	for _, t := range tags {
		n += len(t) + 3
	}
	return n
}

// WireBytes estimates how many bytes e takes in an API answer (see
// Job.WireBytes).
func (e *DLQEntry) WireBytes() int {
	return rowOverheadBytes + len(e.Args) + len(e.Errors) + len(e.Tenant) + len(e.Kind) + len(e.Queue) + len(e.Reason) + len(e.Step)
}

// budget counts the bytes of the rows read against a maximum; zero
// means no maximum.
type budget struct {
	max, used int
}

// spent adds n bytes and reports whether the budget is now spent: the
// caller stops reading rows. The row that spends it is kept, so a page
// always holds at least one row and the API, which counts the encoded
// bytes, has the row that tells it to stop.
func (b *budget) spent(n int) bool {
	if b.max <= 0 {
		return false
	}
	b.used += n
	return b.used >= b.max
}
