package job_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// seeded is one job of a generated workload, as the reference filter
// sees it.
type seeded struct {
	id     int64
	tenant string
	kind   string
	tags   []string
	args   map[string]any
}

var tagPool = []string{"red", "green", "blue", "env:prod", "team/billing", "v1.2-rc+3@x"}

// seedTagged enqueues n jobs over two tenants with random tags (0 to 3
// from tagPool) and args, through every insert path: Enqueue, a
// unique-keyed Enqueue, EnqueueMany by COPY and EnqueueMany with unique
// keys (the unnest statement).
func seedTagged(t *testing.T, e *env, rng *rand.Rand, n int) []seeded {
	t.Helper()
	ctx := context.Background()
	var out []seeded
	var batch []job.Request
	var batchSeeds []seeded
	flush := func() {
		if len(batch) == 0 {
			return
		}
		ids, err := e.client.EnqueueMany(ctx, batch)
		if err != nil {
			t.Fatal(err)
		}
		for i := range ids {
			batchSeeds[i].id = ids[i]
		}
		out = append(out, batchSeeds...)
		batch, batchSeeds = nil, nil
	}
	for i := range n {
		s := seeded{tenant: []string{"t1", "t2"}[rng.IntN(2)], kind: []string{"ka", "kb"}[rng.IntN(2)],
			args: map[string]any{"customer": float64(rng.IntN(5)), "region": []string{"eu", "us"}[rng.IntN(2)], "n": float64(i)}}
		for _, k := range rng.Perm(len(tagPool))[:rng.IntN(4)] {
			s.tags = append(s.tags, tagPool[k])
		}
		args, _ := json.Marshal(s.args)
		r := job.Request{Kind: s.kind, Tenant: s.tenant, Args: json.RawMessage(args), Tags: s.tags}
		switch i % 4 {
		case 0:
			res, err := e.client.Enqueue(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			s.id = res.Job.ID
			if !slices.Equal(res.Job.Tags, s.tags) {
				t.Fatalf("enqueue returned tags %q, want %q", res.Job.Tags, s.tags)
			}
			out = append(out, s)
		case 1:
			r.UniqueKey = fmt.Sprintf("u%d", i)
			if rng.IntN(2) == 0 {
				r.UniqueFor = 3600e9
			}
			res, err := e.client.Enqueue(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			s.id = res.Job.ID
			out = append(out, s)
		case 2:
			batch, batchSeeds = append(batch, r), append(batchSeeds, s)
		case 3:
			r.UniqueKey = fmt.Sprintf("u%d", i)
			batch, batchSeeds = append(batch, r), append(batchSeeds, s)
		}
		if len(batch) >= 40 {
			flush()
		}
	}
	flush()
	return out
}

// query is one search of the reference check.
type query struct {
	tenant string
	kind   string
	tags   []string
	any    bool
	args   map[string]any // top-level key: value
}

func (q query) matches(s seeded) bool {
	if s.tenant != q.tenant || (q.kind != "" && s.kind != q.kind) {
		return false
	}
	if len(q.tags) > 0 {
		n := 0
		for _, t := range q.tags {
			if slices.Contains(s.tags, t) {
				n++
			}
		}
		if (q.any && n == 0) || (!q.any && n < len(q.tags)) {
			return false
		}
	}
	for k, v := range q.args {
		if s.args[k] != v {
			return false
		}
	}
	return true
}

func (q query) filter(t *testing.T) job.Filter {
	f := job.Filter{Tenant: q.tenant, Kind: q.kind, Tags: q.tags, TagsAny: q.any, Limit: 7}
	for k, v := range q.args {
		text, _ := json.Marshal(v)
		if s, ok := v.(string); ok && s == "eu" {
			text = []byte(s) // not JSON: taken as a string
		}
		m, err := job.ArgsMatch(k, string(text))
		if err != nil {
			t.Fatal(err)
		}
		f.Args = append(f.Args, m)
	}
	return f
}

// searchAll pages through f with Client.Search until More is false.
func searchAll(t *testing.T, e *env, f job.Filter) []int64 {
	t.Helper()
	var ids []int64
	for range 1000 {
		p, err := e.client.Search(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range p.Jobs {
			ids = append(ids, j.ID)
		}
		if !p.More {
			return ids
		}
		f.BeforeID = p.Next
	}
	t.Fatal("search never ended")
	return nil
}

// A generated workload of tagged jobs, searched by any/all tags, kind and
// args, each search paged through to its end seven jobs at a time, finds
// exactly what a plain filter in Go finds, newest first, and only in the
// searching tenant. Red with the tag condition dropped from the query
// (store/list.go jobWhere) or TagsAny ignored.
func TestTagSearchMatchesReference(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(26, 5))
	jobs := seedTagged(t, e, rng, 400)
	var tagged int
	for _, s := range jobs {
		if len(s.tags) > 0 {
			tagged++
		}
	}
	if got := e.count(`SELECT count(*) FROM gaffer.jobs WHERE tags IS NOT NULL`); got != tagged {
		t.Fatalf("%d jobs stored with tags, want %d", got, tagged)
	}
	if got := e.count(`SELECT count(*) FROM gaffer.jobs WHERE tags = '{}'`); got != 0 {
		t.Fatalf("%d jobs stored with an empty tag array; want NULL for none", got)
	}
	for i := range 60 {
		q := query{tenant: []string{"t1", "t2"}[rng.IntN(2)], any: rng.IntN(2) == 0}
		for _, k := range rng.Perm(len(tagPool))[:1+rng.IntN(2)] {
			q.tags = append(q.tags, tagPool[k])
		}
		if i%3 == 0 {
			q.kind = "ka"
		}
		switch i % 4 {
		case 1:
			q.args = map[string]any{"customer": float64(rng.IntN(5))}
		case 2:
			q.args = map[string]any{"region": "eu", "customer": float64(rng.IntN(5))}
		case 3:
			q.tags = nil
			q.args = map[string]any{"customer": float64(rng.IntN(5))}
		}
		var want []int64
		for _, s := range jobs {
			if q.matches(s) {
				want = append(want, s.id)
			}
		}
		slices.Sort(want)
		slices.Reverse(want)
		got := searchAll(t, e, q.filter(t))
		if !slices.Equal(got, want) {
			t.Fatalf("query %+v: got %d jobs %v, want %d %v", q, len(got), got, len(want), want)
		}
	}
	// Every job read back carries its tags.
	for _, s := range jobs[:20] {
		j, err := e.client.Get(context.Background(), s.tenant, s.id)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(j.Tags, s.tags) {
			t.Fatalf("job %d tags %q, want %q", s.id, j.Tags, s.tags)
		}
	}
}

// A bulk cancel by tag (and by tag and args) cancels exactly the pending
// jobs of the tenant that the search finds, and no other job. Red with
// the tag or the args condition dropped from the bulk selection.
func TestBulkCancelByTag(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(7, 26))
	jobs := seedTagged(t, e, rng, 300)
	ctx := context.Background()
	state := func() map[int64]string {
		out := map[int64]string{}
		rows, err := e.st.Pool().Query(ctx, `SELECT id, state FROM gaffer.jobs`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var s string
			rows.Scan(&id, &s)
			out[id] = s
		}
		return out
	}
	for _, q := range []query{
		{tenant: "t1", tags: []string{"red"}},
		{tenant: "t2", tags: []string{"green", "blue"}, any: true, args: map[string]any{"customer": float64(2)}},
		{tenant: "t1", args: map[string]any{"region": "eu"}, kind: "kb"},
	} {
		before := state()
		want := map[int64]bool{}
		for _, s := range jobs {
			if q.matches(s) && before[s.id] == "pending" {
				want[s.id] = true
			}
		}
		f := q.filter(t)
		f.Limit = 0
		dry, err := e.client.Bulk(ctx, job.BulkRequest{Action: job.BulkCancel, Filter: f, DryRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if dry.Matched != len(want) {
			t.Fatalf("%+v: dry run counts %d, want %d", q, dry.Matched, len(want))
		}
		res, err := e.client.Bulk(ctx, job.BulkRequest{Action: job.BulkCancel, Filter: f})
		if err != nil {
			t.Fatal(err)
		}
		if res.Acted != len(want) || res.More {
			t.Fatalf("%+v: acted on %d (more %v), want %d", q, res.Acted, res.More, len(want))
		}
		after := state()
		for id, st := range after {
			changed := st != before[id]
			if changed != want[id] || (changed && st != "cancelled") {
				t.Fatalf("%+v: job %d went %s -> %s; in the matching set: %v", q, id, before[id], st, want[id])
			}
		}
		if len(want) == 0 {
			t.Fatalf("%+v: the workload has no match; the test checks nothing", q)
		}
	}
}

// An args search looks through the SearchWindow newest jobs its other
// conditions select: with the only matches older than that, a page finds
// none but says the window was cut and where to go on, and the next page
// finds them. Red when a cut window is not reported (the page would end
// the search with More false).
func TestArgsSearchWindowCut(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	var old []job.Request
	for i := range 5 {
		old = append(old, job.Request{Kind: "k", Args: map[string]int{"x": 1, "i": i}, Tags: []string{"w"}})
	}
	oldIDs, err := e.client.EnqueueMany(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	e.exec(`INSERT INTO gaffer.jobs (tenant, kind, args, tags) SELECT 'default', 'k', '{"x":0}', '{w}' FROM generate_series(1, $1)`, job.SearchWindow+10)
	m, _ := job.ArgsMatch("x", "1")
	f := job.Filter{Tenant: job.DefaultTenant, Tags: []string{"w"}, Args: []json.RawMessage{m}, Limit: 100}
	p, err := e.client.Search(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Jobs) != 0 || !p.More || !p.WindowCut || p.Next == 0 {
		t.Fatalf("first page: %d jobs, more %v, cut %v, next %d; want none, cut, more", len(p.Jobs), p.More, p.WindowCut, p.Next)
	}
	got := searchAll(t, e, f)
	slices.Reverse(oldIDs)
	if !slices.Equal(got, oldIDs) {
		t.Fatalf("paged search found %v, want %v", got, oldIDs)
	}
	// The same search as a bulk action acts on the matches in the first
	// window only: none.
	res, err := e.client.Bulk(ctx, job.BulkRequest{Action: job.BulkCancel, Filter: job.Filter{Tenant: job.DefaultTenant, Args: f.Args}, DryRun: true})
	if err != nil || res.Matched != 0 {
		t.Fatalf("bulk dry run in the window: %+v, %v", res, err)
	}
}

// Bad tags and args conditions are refused naming the field, and an
// enqueue refused writes nothing; the table's check refuses what a caller
// skipping validation would store. Red with ValidateTags emptied (the
// enqueues go through or fail in the database without naming the field).
func TestTagsRefused(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	many := make([]string, job.MaxTags+1)
	for i := range many {
		many[i] = fmt.Sprintf("t%d", i)
	}
	for _, c := range []struct {
		tags  []string
		field string
	}{
		{many, "tags"},
		{[]string{"ok", ""}, "tags[1]"},
		{[]string{strings.Repeat("a", job.MaxTagLen+1)}, "tags[0]"},
		{[]string{"a b"}, "tags[0]"},
		{[]string{"a,b"}, "tags[0]"},
		{[]string{"nul\x00"}, "tags[0]"},
		{[]string{"é"}, "tags[0]"},
		{[]string{"x", "new\nline"}, "tags[1]"},
	} {
		_, err := e.client.Enqueue(ctx, job.Request{Kind: "k", Tags: c.tags})
		var ve *job.ValidationError
		if !errors.As(err, &ve) || ve.Field != c.field {
			t.Errorf("tags %q: error %v; want a validation error on %s", c.tags, err, c.field)
		}
		_, err = e.client.EnqueueMany(ctx, []job.Request{{Kind: "k"}, {Kind: "k", Tags: c.tags}})
		if !errors.As(err, &ve) || !strings.HasSuffix(ve.Field, c.field) {
			t.Errorf("batch, tags %q: error %v; want a validation error on %s", c.tags, err, c.field)
		}
		_, err = e.client.List(ctx, job.Filter{Tags: c.tags})
		if !errors.As(err, &ve) || !strings.HasPrefix(ve.Field, "tag") {
			t.Errorf("filter, tags %q: error %v; want a validation error on tag", c.tags, err)
		}
	}
	if n := e.count(`SELECT count(*) FROM gaffer.jobs`); n != 0 {
		t.Fatalf("%d jobs written by refused enqueues", n)
	}
	// Repeats are dropped, order kept.
	res, err := e.client.Enqueue(ctx, job.Request{Kind: "k", Tags: []string{"b", "a", "b"}})
	if err != nil || !slices.Equal(res.Job.Tags, []string{"b", "a"}) {
		t.Fatalf("repeated tags: %q, %v", res.Job.Tags, err)
	}
	// The database's own bound, for a caller that skips validation.
	for _, bad := range [][]string{{"a b"}, many, {strings.Repeat("a", 65)}, {"a,b"}} {
		_, err := e.st.InsertJob(ctx, nil, store.InsertParams{Tenant: "default", Kind: "k", Queue: "default", MaxAttempts: 1,
			Args: json.RawMessage(`{}`), Tags: bad})
		if err == nil || !strings.Contains(err.Error(), "jobs_tags_check") {
			t.Errorf("store insert of tags %q: %v; want the jobs_tags_check violation", bad, err)
		}
	}
	// Args conditions.
	for _, c := range []struct{ path, value string }{
		{"", "1"}, {"a..b", "1"}, {strings.Repeat("p", job.MaxArgsPathLen+1), "1"}, {"a", strings.Repeat("v", job.MaxArgsValueLen+1)}, {"a\x00", "1"},
	} {
		if _, err := job.ArgsMatch(c.path, c.value); err == nil {
			t.Errorf("ArgsMatch(%q, %q) accepted", c.path, c.value)
		}
	}
	nine := make([]json.RawMessage, job.MaxArgsFilters+1)
	for i := range nine {
		nine[i] = json.RawMessage(`{"a":1}`)
	}
	for _, args := range [][]json.RawMessage{nine, {json.RawMessage(`[1]`)}, {json.RawMessage(`1`)}, {json.RawMessage(`{`)}} {
		if _, err := e.client.List(ctx, job.Filter{Args: args}); err == nil {
			t.Errorf("filter args %s accepted", args)
		}
	}
	if m, err := job.ArgsMatch("customer.id", "42"); err != nil || string(m) != `{"customer":{"id":42}}` {
		t.Errorf("ArgsMatch(customer.id, 42) = %s, %v", m, err)
	}
	if m, err := job.ArgsMatch("region", "eu"); err != nil || string(m) != `{"region":"eu"}` {
		t.Errorf("ArgsMatch(region, eu) = %s, %v", m, err)
	}
}

// A failed job's replay, one by one or in bulk, has the failed job's
// tags. Red with the tags left out of replay_dlq or bulk_retry.
func TestReplayKeepsTags(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	tags := []string{"billing", "env:prod"}
	e.enqueue(job.Request{Kind: "k", Queue: "dead", MaxAttempts: 1, Tags: tags})
	e.claimAndFail("dead", store.Failure{Message: "boom", Kind: "error"})
	res := e.bulk(job.BulkRequest{Action: job.BulkRetry, Filter: job.Filter{Tags: []string{"billing"}, States: []job.State{job.Failed}}})
	if len(res.Retried) != 1 {
		t.Fatalf("bulk retry by tag: %+v", res)
	}
	replay, err := e.client.Get(ctx, "", res.Retried[0].RunID)
	if err != nil || !slices.Equal(replay.Tags, tags) {
		t.Fatalf("bulk replay's tags %q, %v; want %q", replay.Tags, err, tags)
	}
	dead2 := e.enqueue(job.Request{Kind: "k", Queue: "dead2", MaxAttempts: 1, Tags: tags})
	e.claimAndFail("dead2", store.Failure{Message: "boom", Kind: "error"})
	id, err := e.client.Retry(ctx, "", dead2.ID)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.client.Get(ctx, "", id)
	if err != nil || id == dead2.ID || !slices.Equal(again.Tags, tags) {
		t.Fatalf("replay's tags %q; want %q", again.Tags, tags)
	}
}
