package store

import (
	"slices"
	"strings"
	"testing"
)

// An enqueue without tags runs the statements it ran before tags
// existed: insert_job and insert_jobs_unnest never write the tags column
// (their tagged twins do; all of them return it, with every job column),
// and a COPY of untagged jobs sends the columns it sent. Red if tags are
// folded into the plain statements.
func TestUntaggedEnqueueIsUntouched(t *testing.T) {
	t.Parallel()
	written := func(name string) string {
		_, cols, _ := strings.Cut(query(name), "INSERT INTO gaffer.jobs")
		cols, _, _ = strings.Cut(cols, ")")
		return cols
	}
	for _, name := range []string{"insert_job", "insert_jobs_unnest"} {
		if strings.Contains(written(name), "tags") {
			t.Errorf("%s writes tags; an untagged enqueue must run it as before", name)
		}
		if !strings.Contains(written(name+"_tagged"), "tags") {
			t.Errorf("%s_tagged does not write tags", name)
		}
	}
	if slices.Contains(copyColumns, "tags") {
		t.Error("COPY of untagged jobs sends the tags column")
	}
	if _, any := joinedTags([]InsertParams{{}, {}}); any {
		t.Error("a batch without tags runs the tagged statement")
	}
}
