package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/internal/pgtest"
)

// Every statement that writes gaffer.jobs reads the table's checks, and the
// conditions of the triggers it fires, anew from their stored form:
// PostgreSQL parses them per statement, not per session. A long condition
// written out costs every claim, completion and enqueue its reading,
// whether a job has the feature it checks or not; it belongs in a function
// that runs only for the rows that hold the value (tables.sql:
// job_tags_ok, job_ends…). The stored text a state change reads stays
// within a budget. Red before migration 0059/0060: 13,997 bytes of checks
// and 5,699 of the three AFTER UPDATE OF state conditions.
func TestJobWritesReadShortConditions(t *testing.T) {
	st := pgtest.NewStore(t)
	ctx := context.Background()
	var checks, update, insert int
	if err := st.Pool().QueryRow(ctx, `
		SELECT (SELECT coalesce(sum(length(conbin)), 0) FROM pg_constraint
		        WHERE conrelid = 'gaffer.jobs'::regclass AND contype = 'c'),
		       -- (tgtype: 4 INSERT, 16 UPDATE; tgattr: the UPDATE OF columns)
		       (SELECT coalesce(sum(length(tgqual)), 0) FROM pg_trigger
		        WHERE tgrelid = 'gaffer.jobs'::regclass AND tgtype & 16 <> 0
		          AND (tgattr::text = '' OR (SELECT attnum FROM pg_attribute WHERE attrelid = 'gaffer.jobs'::regclass AND attname = 'state') = ANY (tgattr))),
		       (SELECT coalesce(sum(length(tgqual)), 0) FROM pg_trigger
		        WHERE tgrelid = 'gaffer.jobs'::regclass AND tgtype & 4 <> 0)`).Scan(&checks, &update, &insert); err != nil {
		t.Fatal(err)
	}
	const budget = 12 << 10
	if checks+update > budget {
		t.Errorf("a change of a job's state reads %d bytes of checks and %d of trigger conditions, over %d: write a long condition as a function (tables.sql)", checks, update, budget)
	}
	if checks+insert > budget {
		t.Errorf("an enqueue reads %d bytes of checks and %d of trigger conditions, over %d", checks, insert, budget)
	}
	t.Logf("a state change reads %d + %d bytes, an insert %d + %d", checks, update, checks, insert)
}

// The checks that call a function accept and refuse what they did when
// written out (migration 0059): the old expressions and the new ones,
// side by side in PostgreSQL, over generated values at and past their
// bounds.
func TestJobChecksAsFunctionsAgree(t *testing.T) {
	st := pgtest.NewStore(t)
	ctx := context.Background()
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("seed %d", seed)
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	tagChars := "abcXYZ019_.:/=+@-"
	tag := func() string { // a valid tag, up to its 64 bytes
		b := make([]byte, 1+rng.IntN(8))
		if rng.IntN(6) == 0 {
			b = make([]byte, 64)
		}
		for i := range b {
			b[i] = tagChars[rng.IntN(len(tagChars))]
		}
		return string(b)
	}
	var tags []any
	for range 600 {
		switch rng.IntN(12) {
		case 0:
			tags = append(tags, nil)
		case 1:
			tags = append(tags, []string{})
		default:
			ts := make([]string, rng.IntN(18)+1) // up to two past the bound
			for i := range ts {
				ts[i] = tag()
			}
			if rng.IntN(5) < 2 { // one tag past its bounds
				ts[rng.IntN(len(ts))] = pick("", strings.Repeat("a", 65), "a,b", ",", "a b", "é", "a\n", "NULL")
			}
			tags = append(tags, ts)
		}
	}
	// One value a statement: arrays of arrays of different lengths do not
	// make one PostgreSQL array.
	for _, v := range append(tags, [][]string{{"a", "b"}, {"c", "d"}}) {
		var old, now bool
		var shown string
		if err := st.Pool().QueryRow(ctx, `
			SELECT coalesce($1::text[]::text, 'NULL'),
			       (array_ndims($1) = 1 AND cardinality($1) BETWEEN 1 AND 16 AND array_position($1, NULL) IS NULL
			        AND array_to_string($1, ',') ~ '^[A-Za-z0-9_.:/=+@-]{1,64}(,[A-Za-z0-9_.:/=+@-]{1,64})*$'
			        AND cardinality(string_to_array(array_to_string($1, ','), ',')) = cardinality($1)) IS NOT false,
			       ($1::text[] IS NULL OR gaffer.job_tags_ok($1)) IS NOT false`, v).Scan(&shown, &old, &now); err != nil {
			t.Fatal(err)
		}
		if old != now {
			t.Errorf("tags %s: the written-out check says %v, the function's %v", shown, old, now)
		}
	}
	for range 300 {
		var progress, message, tracestate, traceparent any
		if rng.IntN(3) > 0 {
			progress = []float64{-0.5, 0, 50, 100, 100.5}[rng.IntN(5)]
		}
		if rng.IntN(3) > 0 {
			message = strings.Repeat("m", 1020+rng.IntN(8))
		}
		if rng.IntN(3) > 0 {
			tracestate = strings.Repeat("s", 508+rng.IntN(8))
		}
		if rng.IntN(2) > 0 {
			traceparent = "00-" + strings.Repeat("a", 32) + "-" + strings.Repeat("b", 16) + "-01"
		}
		var p1, p2, s1, s2 bool
		if err := st.Pool().QueryRow(ctx, `
			SELECT ($1::double precision BETWEEN 0 AND 100 AND octet_length($2::text) <= 1024) IS NOT false,
			       ($1 IS NULL AND $2 IS NULL OR gaffer.job_progress_ok($1, $2)) IS NOT false,
			       ($3::text IS NULL OR (octet_length($3) <= 512 AND $4::text IS NOT NULL)) IS NOT false,
			       ($3 IS NULL OR gaffer.job_tracestate_ok($3, $4)) IS NOT false`,
			progress, message, tracestate, traceparent).Scan(&p1, &p2, &s1, &s2); err != nil {
			t.Fatal(err)
		}
		if p1 != p2 || s1 != s2 {
			t.Errorf("progress %v, message of %v, tracestate of %v, traceparent %v: written out %v %v, as functions %v %v",
				progress, lenOf(message), lenOf(tracestate), traceparent != nil, p1, s1, p2, s2)
		}
	}
	// And the table refuses through them: a bad tag, a progress past 100.
	for _, bad := range []string{
		`INSERT INTO gaffer.jobs (kind, queue, args, tags) VALUES ('k', 'q', '{}', ARRAY['a,b'])`,
		`INSERT INTO gaffer.jobs (kind, queue, args, progress) VALUES ('k', 'q', '{}', 100.5)`,
		`INSERT INTO gaffer.jobs (kind, queue, args, tracestate) VALUES ('k', 'q', '{}', 'x')`,
	} {
		if _, err := st.Pool().Exec(ctx, bad); err == nil || !strings.Contains(err.Error(), "_check") {
			t.Errorf("%s: %v, want a check's refusal", bad, err)
		}
	}
}

func lenOf(v any) string {
	if s, ok := v.(string); ok {
		return fmt.Sprint(len(s))
	}
	return "NULL"
}
