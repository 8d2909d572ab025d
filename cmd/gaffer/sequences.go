package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"
)

// sequenceRow is a sequence as the API answers it.
type sequenceRow struct {
	Tenant   string     `json:"tenant"`
	Key      string     `json:"key"`
	Head     int64      `json:"head"`
	HaltedBy int64      `json:"halted_by"`
	HaltedAt *time.Time `json:"halted_at"`
	Held     int64      `json:"held"`
	Since    *time.Time `json:"since"`
}

func (m *Main) runSequences(ctx context.Context, args []string) error {
	return m.runGroup(ctx, "sequences", []action{
		{"get", "show where a sequence stands (its jobs: jobs list --sequence KEY)", (*Main).sequencesGet},
		{"resume", "let a halted sequence go on with its next held job", (*Main).sequencesResume},
	}, args)
}

func (m *Main) sequencesGet(ctx context.Context, args []string) error {
	fs := m.newFlagSet("sequences get", "sequences get KEY [flags]")
	cf := addClientFlags(fs)
	tenant := fs.String("tenant", "-", "", "the sequence's tenant (tokens spanning tenants only; default \"default\")")
	c, err := cf.start(fs, args, 1, "a sequence key")
	if err != nil {
		return err
	}
	return show(m, ctx, cf, c, "GET", sequencePath(fs.Arg(0), "", *tenant), nil, m.printSequence)
}

func (m *Main) sequencesResume(ctx context.Context, args []string) error {
	fs := m.newFlagSet("sequences resume", "sequences resume KEY [flags]\n\nThe failed job that halted the sequence stays failed (and in the DLQ);\nthe oldest held job takes the turn.")
	cf := addClientFlags(fs)
	tenant := fs.String("tenant", "-", "", "the sequence's tenant (tokens spanning tenants only; default \"default\")")
	c, err := cf.start(fs, args, 1, "a sequence key")
	if err != nil {
		return err
	}
	return show(m, ctx, cf, c, "POST", sequencePath(fs.Arg(0), "/resume", *tenant), nil, m.printSequence)
}

// sequencePath is the API path of sequence key (escaped: a key may hold
// '/' or any other character), then suffix.
func sequencePath(key, suffix, tenant string) string {
	p := "/v1/sequences/" + url.PathEscape(key) + suffix
	if tenant != "" {
		p += "?tenant=" + url.QueryEscape(tenant)
	}
	return p
}

func (m *Main) printSequence(tw *tabwriter.Writer, s sequenceRow) {
	turn := "-"
	if s.Head != 0 {
		turn = "job " + strconv.FormatInt(s.Head, 10)
	}
	halted := "no"
	if s.HaltedBy != 0 {
		halted = fmt.Sprintf("by job %d at %s (resume: gaffer sequences resume, or replay it)", s.HaltedBy, m.fmtTime(s.HaltedAt))
	}
	held := strconv.FormatInt(s.Held, 10)
	if s.Held >= 10000 {
		held += " or more"
	}
	fmt.Fprintf(tw, "sequence\t%s\ntenant\t%s\nturn\t%s\nhalted\t%s\nheld\t%s\n", strconv.Quote(s.Key), s.Tenant, turn, halted, held)
}
