package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/gafferhq/gaffer/api"
	"github.com/gafferhq/gaffer/cron"
)

// G8/G13 on the wire: a tenant's token is held to the cron quota — 400
// with the limit's own code, naming it, nothing written — on POST, PUT
// (dry runs too) and PATCH; a token spanning every tenant is not.
func TestCronQuotaOnTheWire(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *api.Config) { c.CronQuota = cron.Quota{MaxEntries: 2, MaxFiresPerMinute: 10} })
	body := func(name, schedule string) string {
		return fmt.Sprintf(`{"name":%q,"schedule":%q,"job":{"kind":"k"}}`, name, schedule)
	}
	p := e.expectProblem(e.do(e.acme, "POST", "/v1/cron", body("fast", "* * * * * *")), 400, api.CodeCronTooFrequent)
	if p.Field != "schedule" || !strings.Contains(p.Detail, "min_interval") || !strings.Contains(p.Detail, "every 10s") {
		t.Fatalf("problem %+v: want the field and the limit named", p)
	}
	e.expectProblem(e.do(e.acme, "PUT", "/v1/cron/fast?dry_run=true", `{"schedule":"@every 5s","job":{"kind":"k"}}`), 400, api.CodeCronTooFrequent)
	e.expectProblem(e.do(e.acme, "PUT", "/v1/cron/fast", `{"schedule":"@every 5s","job":{"kind":"k"}}`), 400, api.CodeCronTooFrequent)
	if r := e.do(e.acme, "POST", "/v1/cron", body("ten", "@every 10s")); r.Status != 201 {
		t.Fatalf("a 10s entry: %d %s", r.Status, r.Body)
	}
	p = e.expectProblem(e.do(e.acme, "POST", "/v1/cron", body("ten-2", "@every 10s")), 400, api.CodeCronRateExceeded)
	if !strings.Contains(p.Detail, "max_fires_per_minute 10") {
		t.Fatalf("problem %+v: want the limit named", p)
	}
	if r := e.do(e.acme, "POST", "/v1/cron", body("daily", "@daily")); r.Status != 201 {
		t.Fatalf("a daily entry: %d %s", r.Status, r.Body)
	}
	p = e.expectProblem(e.do(e.acme, "POST", "/v1/cron", body("daily-2", "@daily")), 400, api.CodeCronTooMany)
	if !strings.Contains(p.Detail, "max_entries 2") {
		t.Fatalf("problem %+v: want the limit named", p)
	}
	e.expectProblem(e.do(e.acme, "PATCH", "/v1/cron/daily", `{"schedule":"@every 1s"}`), 400, api.CodeCronTooFrequent)
	if n := e.count(`SELECT count(*) FROM gaffer.cron_entries WHERE tenant = 'acme'`); n != 2 {
		t.Fatalf("acme has %d entries after the refusals, want 2", n)
	}
	if s := e.count(`SELECT count(*) FROM gaffer.cron_entries WHERE tenant = 'acme' AND name = 'daily' AND schedule = '@daily'`); s != 1 {
		t.Fatal("a refused PATCH changed the schedule")
	}
	// An operator's token may go beyond, in any tenant.
	if r := e.do(e.admin, "POST", "/v1/cron", `{"tenant":"acme","name":"fast","schedule":"* * * * * *","job":{"kind":"k"}}`); r.Status != 201 {
		t.Fatalf("an operator's per-second entry: %d %s", r.Status, r.Body)
	}
}
