package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
)

// limitRow is a limit as the API shows it.
type limitRow struct {
	Name        string `json:"name"`
	Queue       string `json:"queue"`
	Kind        string `json:"kind"`
	Tenant      string `json:"tenant"`
	Key         string `json:"key"`
	Concurrency int    `json:"concurrency"`
	Rate        int    `json:"rate"`
	Period      string `json:"period"`
	Burst       int    `json:"burst"`
	InUse       int64  `json:"in_use"`
	Busiest     int64  `json:"busiest_key_running"`
	Due         int64  `json:"due"`
}

func (l limitRow) scope() string {
	var parts []string
	for _, p := range [][2]string{{"queue", l.Queue}, {"kind", l.Kind}, {"tenant", l.Tenant}} {
		if p[1] != "" {
			parts = append(parts, p[0]+"="+p[1])
		}
	}
	if len(parts) == 0 {
		return "all jobs"
	}
	return strings.Join(parts, " ")
}

func (l limitRow) caps() string {
	var parts []string
	if l.Concurrency > 0 {
		parts = append(parts, fmt.Sprintf("%d running", l.Concurrency))
	}
	if l.Rate > 0 {
		parts = append(parts, fmt.Sprintf("%d per %s (burst %d)", l.Rate, l.Period, l.Burst))
	}
	return strings.Join(parts, ", ")
}

func (m *Main) runLimits(ctx context.Context, args []string) error {
	return m.runGroup(ctx, "limits", []action{
		{"list", "list limits with their usage", (*Main).limitsList},
		{"get", "show one limit with its busiest keys", (*Main).limitsGet},
		{"set", "create or replace a limit", (*Main).limitsSet},
		{"delete", "delete a limit", (*Main).limitsDelete},
	}, args)
}

func (m *Main) limitsList(ctx context.Context, args []string) error {
	fs := m.newFlagSet("limits list", "limits list [flags]")
	cf := addClientFlags(fs)
	c, err := cf.start(fs, args, 0, "no positional arguments")
	if err != nil {
		return err
	}
	return list(m, ctx, cf, c, "/v1/limits", table[limitRow]{
		header: "LIMIT\tAPPLIES TO\tPER KEY\tCAP\tRUNNING\tBUSIEST KEY\tDUE",
		row: func(l limitRow) []any {
			return []any{l.Name, l.scope(), orDash(l.Key), l.caps(), l.InUse, l.Busiest, l.Due}
		},
	})
}

func (m *Main) limitsGet(ctx context.Context, args []string) error {
	fs := m.newFlagSet("limits get", "limits get NAME [flags]")
	cf := addClientFlags(fs)
	c, err := cf.start(fs, args, 1, "a limit name")
	if err != nil {
		return err
	}
	type limitDetail struct {
		limitRow
		Keys []struct {
			Key     string `json:"key"`
			Running int64  `json:"running"`
		} `json:"keys"`
	}
	return show(m, ctx, cf, c, "GET", "/v1/limits/"+url.PathEscape(fs.Arg(0)), nil, func(tw *tabwriter.Writer, l limitDetail) {
		fmt.Fprintf(tw, "limit\t%s\napplies to\t%s\nper key\t%s\ncap\t%s\nrunning\t%d (busiest key %d)\ndue\t%d\n",
			l.Name, l.scope(), orDash(l.Key), l.caps(), l.InUse, l.Busiest, l.Due)
		for _, k := range l.Keys {
			fmt.Fprintf(tw, "  key %q\t%d running\n", k.Key, k.Running)
		}
	})
}

func (m *Main) limitsSet(ctx context.Context, args []string) error {
	fs := m.newFlagSet("limits set", "limits set NAME [--queue Q] [--kind K] [--tenant T] [--key KEY] [--concurrency N] [--rate N/PERIOD] [--burst N] [flags]\n\n"+
		"Creates or replaces a cluster-wide limit, enforced by every claim: at most\n--concurrency of the matched jobs running at once, at most --rate starts\n"+
		"(e.g. 100/1m), counted per --key: tenant, kind, queue, limit_key,\nfairness_key, args.<field>…, or host(args.<field>…). Jobs over it wait.")
	cf := addClientFlags(fs)
	queue := fs.String("queue", "-", "", "only jobs of this queue")
	kind := fs.String("kind", "-", "", "only jobs of this kind")
	tenant := fs.String("tenant", "-", "", "only jobs of this tenant")
	key := fs.String("key", "-", "", "count per this key (default: one count)")
	concurrency := fs.Int("concurrency", "-", 0, "most running at once per key")
	rate := fs.String("rate", "-", "", "most starts per period per key, as N/PERIOD (e.g. 10/1s)")
	burst := fs.Int("burst", "-", 0, "starts allowed at once under --rate (default: N)")
	c, err := cf.start(fs, args, 1, "a limit name")
	if err != nil {
		return err
	}
	body := map[string]any{"queue": *queue, "kind": *kind, "tenant": *tenant, "key": *key, "concurrency": *concurrency, "burst": *burst}
	if *rate != "" {
		n, period, ok := strings.Cut(*rate, "/")
		count, err := strconv.Atoi(n)
		if !ok || err != nil || count < 1 || period == "" {
			return usageError(fmt.Sprintf("--rate: want N/PERIOD such as 10/1s, got %q", *rate))
		}
		body["rate"], body["period"] = count, period
	}
	return show(m, ctx, cf, c, "PUT", "/v1/limits/"+url.PathEscape(fs.Arg(0)), body, func(tw *tabwriter.Writer, l limitRow) {
		fmt.Fprintf(tw, "limit %s: %s, per %s: %s\n", l.Name, l.scope(), orDash(l.Key), l.caps())
	})
}

func (m *Main) limitsDelete(ctx context.Context, args []string) error {
	fs := m.newFlagSet("limits delete", "limits delete NAME [flags]")
	cf := addClientFlags(fs)
	c, err := cf.start(fs, args, 1, "a limit name")
	if err != nil {
		return err
	}
	if err := c.do(ctx, "DELETE", "/v1/limits/"+url.PathEscape(fs.Arg(0)), nil, nil); err != nil {
		return err
	}
	return m.output(*cf.json, json.RawMessage(`{"deleted":1}`), func(tw *tabwriter.Writer) { fmt.Fprintf(tw, "deleted limit %s\n", fs.Arg(0)) })
}

func (m *Main) runTenants(ctx context.Context, args []string) error {
	return m.runGroup(ctx, "tenants", []action{
		{"list", "list tenants whose weight in fair claiming is not 1", (*Main).tenantsList},
		{"weight", "set a tenant's weight in fair claiming (1-1000)", (*Main).tenantsWeight},
	}, args)
}

func (m *Main) tenantsList(ctx context.Context, args []string) error {
	fs := m.newFlagSet("tenants list", "tenants list [flags]")
	cf := addClientFlags(fs)
	c, err := cf.start(fs, args, 0, "no positional arguments")
	if err != nil {
		return err
	}
	type tenantRow struct {
		Tenant string `json:"tenant"`
		Weight int    `json:"weight"`
	}
	return list(m, ctx, cf, c, "/v1/tenants", table[tenantRow]{
		header: "TENANT\tWEIGHT",
		row:    func(t tenantRow) []any { return []any{t.Tenant, t.Weight} },
	})
}

func (m *Main) tenantsWeight(ctx context.Context, args []string) error {
	fs := m.newFlagSet("tenants weight", "tenants weight TENANT WEIGHT [flags]\n\nA tenant of weight 3 gets three times the claim slots of a tenant of weight 1\nwhile both have jobs due in a queue.")
	cf := addClientFlags(fs)
	c, err := cf.start(fs, args, 2, "a tenant and a weight")
	if err != nil {
		return err
	}
	w, err := strconv.Atoi(fs.Arg(1))
	if err != nil {
		return usageError(fmt.Sprintf("the weight must be a whole number from 1 to 1000, got %q", fs.Arg(1)))
	}
	return show(m, ctx, cf, c, "PUT", "/v1/tenants/"+url.PathEscape(fs.Arg(0)), map[string]int{"weight": w}, func(tw *tabwriter.Writer, _ json.RawMessage) {
		fmt.Fprintf(tw, "tenant %s: weight %d\n", fs.Arg(0), w)
	})
}
