package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// jobStates are the states a job row can be in: the jobs_state_check
// constraint's list (job.States names them for Go callers).
var jobStates = []string{"pending", "held", "running", "retrying", "completed", "failed", "cancelled"}

// JobFilter selects jobs to list. Zero fields do not filter.
type JobFilter struct {
	Tenant string
	States []string
	Queue  string
	Kind   string
	// CronEntry keeps the jobs one cron entry made (scheduled and
	// triggered); WorkflowRun the jobs of one workflow run's steps. Each
	// has its own partial index in id order (migration cron_status).
	CronEntry   string
	WorkflowRun int64
	// Sequence keeps the jobs of one sequence (jobs_sequence_idx, in id
	// order).
	Sequence string
	// Batch keeps the jobs enqueued into one batch (jobs_batch_idx).
	Batch int64
	// NoTimers leaves out Gaffer's own workflow timer jobs (kinds
	// gaffer.sleep and gaffer.signal).
	NoTimers bool
	// Search keeps the jobs whose kind or args contain the text (case
	// folded), looked for among the SearchWindow newest jobs the other
	// conditions select: a search reads a bounded number of rows.
	Search string
	// Tags keeps the jobs carrying every one of these tags, or with
	// TagsAny at least one: conditions jobs_tags_idx answers, over all
	// jobs.
	Tags    []string
	TagsAny bool
	// Args keeps the jobs whose args contain every one of these JSON
	// values (jsonb @>; each an object, such as {"customer":42}), looked
	// for like Search among the SearchWindow newest jobs the other
	// conditions select.
	Args []json.RawMessage
	// BeforeID is the pagination cursor: only jobs with a smaller id.
	BeforeID int64
	Limit    int
	// MaxBytes stops the list once the rows read take this many bytes
	// (Job.WireBytes), the row that crosses it included; 0: no bound.
	MaxBytes int
}

// windowed reports whether f has conditions looked for only among the
// SearchWindow newest jobs its other conditions select.
func (f JobFilter) windowed() bool { return f.Search != "" || len(f.Args) > 0 }

// windowMatch is f's windowed conditions (its search and args), their
// values added to w's parameters.
func windowMatch(w *where, f JobFilter) string {
	var conds []string
	if f.Search != "" {
		conds = append(conds, searchMatch(w.next(f.Search)))
	}
	for _, a := range f.Args {
		conds = append(conds, "args::jsonb @> "+w.next(string(a))+"::jsonb")
	}
	return strings.Join(conds, " AND ")
}

// ListJobs returns jobs matching f, newest first, without step inputs
// (GetJob reads them).
func (s *Store) ListJobs(ctx context.Context, f JobFilter) ([]Job, error) {
	jobs, _, err := s.ListJobsPage(ctx, f)
	return jobs, err
}

// ListJobsPage is ListJobs saying also whether jobs may follow those it
// returns: it stopped at f.Limit or at f.MaxBytes. Like ListJobs, it
// leaves step inputs out.
func (s *Store) ListJobsPage(ctx context.Context, f JobFilter) (jobs []Job, more bool, _ error) {
	p, err := s.SearchJobs(ctx, f)
	return p.Jobs, p.More, err
}

// SearchPage is a page of jobs SearchJobs found.
type SearchPage struct {
	Jobs []Job
	// More: jobs may follow (the page stopped at its limit or byte
	// bound, or the search window was cut).
	More bool
	// WindowEnd, when not 0, is where the search window was cut: f's
	// search and args were looked for only among the SearchWindow jobs
	// from the cursor down to this id, and older jobs may match too. The
	// next page starts before it (BeforeID = WindowEnd).
	WindowEnd int64
}

// SearchJobs is ListJobsPage saying also where the search window of a
// windowed filter (Search, Args) was cut, when it was: a page that found
// fewer jobs than its limit in a full window.
func (s *Store) SearchJobs(ctx context.Context, f JobFilter) (SearchPage, error) {
	jobs, more, err := s.listJobsPage(ctx, f)
	if err != nil || !f.windowed() || more {
		return SearchPage{Jobs: jobs, More: more}, err
	}
	sql, args, err := windowEndSQL(f)
	if err != nil {
		return SearchPage{}, err
	}
	var n int
	var end int64
	if err := s.pool.QueryRow(ctx, sql, args...).Scan(&n, &end); err != nil {
		return SearchPage{}, fmt.Errorf("list jobs: search window: %w", err)
	}
	if n < SearchWindow {
		return SearchPage{Jobs: jobs}, nil
	}
	return SearchPage{Jobs: jobs, More: true, WindowEnd: end}, nil
}

// windowEndSQL counts the jobs in f's search window and finds its oldest.
func windowEndSQL(f JobFilter) (string, []any, error) {
	w, err := jobWhere(f)
	if err != nil {
		return "", nil, err
	}
	if f.BeforeID > 0 {
		w.add("id < ?", f.BeforeID)
	}
	window := w.next(SearchWindow)
	return "SELECT count(*), coalesce(min(id), 0) FROM (SELECT id FROM gaffer.jobs WHERE " + w.sql() + " ORDER BY id DESC LIMIT " + window + ") w", w.args, nil
}

func (s *Store) listJobsPage(ctx context.Context, f JobFilter) (jobs []Job, more bool, _ error) {
	sql, args, err := listJobsSQL(f)
	if err != nil {
		return nil, false, err
	}
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, false, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	var cut bool
	var extra []any
	if f.MaxBytes > 0 {
		extra = append(extra, &cut)
	}
	sc := newJobScanner(extra...)
	b := budget{max: f.MaxBytes}
	for rows.Next() {
		j, err := sc.scan(rows)
		if err != nil {
			return nil, false, fmt.Errorf("list jobs: %w", err)
		}
		// A listing leaves step inputs out (GetJob has them): a page of step
		// jobs would carry up to its length times a step's input budget.
		j.Inputs = nil
		jobs = append(jobs, j)
		if b.spent(j.WireBytes()) {
			return jobs, true, nil
		}
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("list jobs: %w", err)
	}
	return jobs, cut || len(jobs) == clampLimit(f.Limit), nil
}

// SearchWindow is how many of the newest jobs a search looks through.
const SearchWindow = 10000

// searchMatch is JobFilter.Search's condition, on the parameter p.
func searchMatch(p string) string {
	return "(strpos(lower(kind), lower(" + p + "::text)) > 0 OR strpos(lower(args::text), lower(" + p + "::text)) > 0)"
}

// jobWhere is f's conditions but its search and cursor.
func jobWhere(f JobFilter) (where, error) {
	var w where
	if f.Tenant != "" {
		w.add("tenant = ?", f.Tenant)
	}
	if len(f.States) > 0 {
		// Written out, not a parameter: a plan made for one literal state
		// can use that state's partial index (failed and cancelled jobs
		// have their own by id, so listing them never walks the table).
		lits := make([]string, len(f.States))
		for i, st := range f.States {
			if !slices.Contains(jobStates, st) {
				return where{}, fmt.Errorf("list jobs: unknown state %q", st)
			}
			lits[i] = "'" + st + "'"
		}
		w.addLiteral("state IN (" + strings.Join(lits, ", ") + ")")
	}
	if f.Queue != "" {
		w.add("queue = ?", f.Queue)
	}
	if f.Kind != "" {
		w.add("kind = ?", f.Kind)
	}
	if f.CronEntry != "" {
		w.add("cron_entry = ?", f.CronEntry)
	}
	if f.WorkflowRun != 0 {
		w.add("workflow_run = ?", f.WorkflowRun)
	}
	if f.Sequence != "" {
		w.add("sequence_key = ?", f.Sequence)
	}
	if f.Batch != 0 {
		w.add("batch_id = ?", f.Batch)
	}
	if len(f.Tags) > 0 {
		op := "@>"
		if f.TagsAny {
			op = "&&"
		}
		w.add("tags "+op+" ?::text[]", f.Tags)
	}
	if f.NoTimers {
		w.addLiteral("kind NOT LIKE 'gaffer.%'")
	}
	return w, nil
}

// listJobsSQL is ListJobs' query and its arguments.
func listJobsSQL(f JobFilter) (string, []any, error) {
	w, err := jobWhere(f)
	if err != nil {
		return "", nil, err
	}
	if f.BeforeID > 0 {
		w.add("id < ?", f.BeforeID)
	}
	from := "gaffer.jobs WHERE " + w.sql()
	if f.windowed() {
		window := w.next(SearchWindow)
		from = "(SELECT * FROM gaffer.jobs WHERE " + w.sql() + " ORDER BY id DESC LIMIT " + window + ") s WHERE " + windowMatch(&w, f)
	}
	limit := w.next(clampLimit(f.Limit))
	page := "SELECT " + expandJobColumns("{{job}}") + " FROM " + from + " ORDER BY id DESC LIMIT " + limit
	if f.MaxBytes <= 0 {
		return page, w.args, nil
	}
	// The page's rows past the budget are not sent at all: each row's
	// size as stored (listRowBytes) is summed in id order over the page,
	// and the rows after the one that crosses the budget are left in the
	// database. The last column says the page was cut there.
	budget := w.next(f.MaxBytes)
	sql := "SELECT " + expandJobColumns("{{job}}") + ", gaffer_upto >= " + budget + " FROM (" +
		"SELECT *, sum(" + listRowBytes + ") OVER (ORDER BY id DESC) AS gaffer_upto, " + listRowBytes + " AS gaffer_size FROM (" + page + ") l" +
		") w WHERE gaffer_upto - gaffer_size < " + budget + " ORDER BY id DESC"
	return sql, w.args, nil
}

// listRowBytes is a job row's size as a list pages it, in SQL: about
// Job.WireBytes, as the values are stored (pg_column_size reads a value's
// header, not the value: octet_length would fetch every value from TOAST
// and decompress it, the cost the budget is there to avoid). A
// compressed value counts less than it will take on the wire, so the
// page may send a few rows more than fit, which ListJobsPage reads and
// drops; it never sends fewer.
const listRowBytes = "(pg_column_size(args) + coalesce(pg_column_size(result), 0) + pg_column_size(errors) + coalesce(pg_column_size(tags), 0) + " + rowOverheadText + ")"

func clampLimit(n int) int {
	switch {
	case n <= 0:
		return 100
	case n > 1000:
		return 1000
	}
	return n
}

// DLQFilter selects DLQ entries. Zero fields do not filter.
type DLQFilter struct {
	Tenant        string
	Queue         string
	Kind          string
	FailedAfter   time.Time
	FailedBefore  time.Time
	ErrorContains string
	// JobID keeps the entry of one dead job.
	JobID int64
	// Replayed, when set, keeps only replayed (true) or unreplayed (false)
	// entries.
	Replayed *bool
	BeforeID int64
	Limit    int
	// MaxBytes stops the list once the entries read take this many bytes
	// (DLQEntry.WireBytes), the one that crosses it included; 0: no bound.
	MaxBytes int
}

func (f DLQFilter) where() *where {
	w := &where{}
	if f.Tenant != "" {
		w.add("tenant = ?", f.Tenant)
	}
	if f.Queue != "" {
		w.add("queue = ?", f.Queue)
	}
	if f.Kind != "" {
		w.add("kind = ?", f.Kind)
	}
	if !f.FailedAfter.IsZero() {
		w.add("failed_at >= ?", f.FailedAfter)
	}
	if !f.FailedBefore.IsZero() {
		w.add("failed_at < ?", f.FailedBefore)
	}
	if f.ErrorContains != "" {
		w.add("strpos(lower(errors::text), lower(?)) > 0", f.ErrorContains)
	}
	if f.JobID != 0 {
		w.add("job_id = ?", f.JobID)
	}
	if f.Replayed != nil {
		if *f.Replayed {
			w.addLiteral("replayed_at IS NOT NULL")
		} else {
			w.addLiteral("replayed_at IS NULL")
		}
	}
	if f.BeforeID > 0 {
		w.add("id < ?", f.BeforeID)
	}
	return w
}

// CountJobsByState counts the jobs f selects (its cursor, limit and byte
// bound ignored) in each state, each count stopping at limit: a count
// equal to it means at least that many, and stays fast on a table of
// millions. With f.Search the counts are of the matches among the
// SearchWindow newest jobs the other conditions select, and exact there.
func (s *Store) CountJobsByState(ctx context.Context, f JobFilter, limit int) (map[string]int, error) {
	sql, args, err := countByStateSQL(f, limit)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, fmt.Errorf("count jobs: %w", err)
		}
		out[st] = min(n, limit)
	}
	return out, rows.Err()
}

// countByStateSQL is CountJobsByState's query and its arguments.
func countByStateSQL(f JobFilter, limit int) (string, []any, error) {
	f.States, f.BeforeID = nil, 0
	w, err := jobWhere(f)
	if err != nil {
		return "", nil, err
	}
	var sql string
	if f.windowed() {
		window := w.next(SearchWindow)
		sql = "SELECT state, count(*) FROM (SELECT state, kind, args FROM gaffer.jobs WHERE " + w.sql() + " ORDER BY id DESC LIMIT " + window +
			") s WHERE " + windowMatch(&w, f) + " GROUP BY state"
	} else {
		// One bounded count per state, each with its state written out (a
		// plan can use that state's partial index).
		lim := w.next(limit)
		parts := make([]string, len(jobStates))
		count := func(cond string) string {
			return "(SELECT count(*) FROM (SELECT 1 FROM gaffer.jobs WHERE " + w.sql() + " AND " + cond + " LIMIT " + lim + ") c)"
		}
		for i, st := range jobStates {
			n := count("state = '" + st + "'")
			if st == "pending" {
				// Pending jobs are in the claim index while due and in the
				// scheduled index until then; no index holds them all.
				n = "least(" + count("state IN ('pending', 'retrying') AND due AND state = 'pending'") + " + " +
					count("state IN ('pending', 'retrying') AND NOT due AND state = 'pending'") + ", " + lim + ")"
			}
			parts[i] = "SELECT '" + st + "'::text, " + n
		}
		sql = strings.Join(parts, " UNION ALL ")
	}
	return sql, w.args, nil
}
