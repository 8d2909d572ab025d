package api_test

import (
	"fmt"
	"strings"
	"testing"
)

// Every bad input gets a problem with a stable code (and the field, when
// one is at fault), and writes nothing.
func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	big := `{"kind":"k","args":{"x":"` + strings.Repeat("a", 3<<20) + `"}}`
	// A join of 33 steps' results: over a step's input budget (32 MiB).
	wide := `{"name":"w","steps":[`
	var deps []string
	for i := range 33 {
		wide += fmt.Sprintf(`{"name":"p%d","kind":"k"},`, i)
		deps = append(deps, fmt.Sprintf(`"p%d"`, i))
	}
	wide += `{"name":"join","kind":"k","depends_on":[` + strings.Join(deps, ",") + `]}]}`
	cases := []struct {
		name, method, path, body, contentType string
		status                                int
		code, field                           string
	}{
		{"invalid JSON", "POST", "/v1/jobs", `{"kind":`, "", 400, "invalid_json", ""},
		{"trailing data", "POST", "/v1/jobs", `{"kind":"k"} {"kind":"k"}`, "", 400, "invalid_json", ""},
		{"empty body", "POST", "/v1/jobs", ``, "", 400, "invalid_json", ""},
		{"unknown field", "POST", "/v1/jobs", `{"kind":"k","prio":3}`, "", 400, "unknown_field", "prio"},
		{"wrong type", "POST", "/v1/jobs", `{"kind":"k","priority":"high"}`, "", 400, "invalid_field", "priority"},
		{"wrong type nested", "POST", "/v1/cron", `{"name":"c","schedule":"@daily","job":{"kind":3}}`, "", 400, "invalid_field", "job.kind"},
		{"body too large", "POST", "/v1/jobs", big, "", 413, "body_too_large", ""},
		{"wrong content type", "POST", "/v1/jobs", `{"kind":"k"}`, "text/plain", 415, "unsupported_media_type", ""},
		{"NUL byte", "POST", "/v1/jobs", "{\"kind\":\"k\",\"args\":{\"a\":\"x\\u0000y\"}}", "", 400, "invalid_json", ""},
		{"raw NUL byte", "POST", "/v1/jobs", "{\"kind\":\"k\x00\"}", "", 400, "invalid_json", ""},
		{"missing kind", "POST", "/v1/jobs", `{"queue":"q"}`, "", 400, "invalid_field", "kind"},
		{"queue out of format", "POST", "/v1/jobs", `{"kind":"k","queue":"Big Queue!"}`, "", 400, "invalid_field", "queue"},
		{"priority out of range", "POST", "/v1/jobs", `{"kind":"k","priority":10}`, "", 400, "invalid_field", "priority"},
		{"negative priority", "POST", "/v1/jobs", `{"kind":"k","priority":-1}`, "", 400, "invalid_field", "priority"},
		{"attempts out of range", "POST", "/v1/jobs", `{"kind":"k","max_attempts":5000}`, "", 400, "invalid_field", "max_attempts"},
		{"zero attempts", "POST", "/v1/jobs", `{"kind":"k","max_attempts":0}`, "", 400, "invalid_field", "max_attempts"},
		{"timeout out of range", "POST", "/v1/jobs", `{"kind":"k","timeout":"900h"}`, "", 400, "invalid_field", "timeout"},
		{"timeout not a duration", "POST", "/v1/jobs", `{"kind":"k","timeout":"soon"}`, "", 400, "invalid_field", "timeout"},
		{"negative delay", "POST", "/v1/jobs", `{"kind":"k","delay":"-5m"}`, "", 400, "invalid_field", "delay"},
		{"run_at not RFC 3339", "POST", "/v1/jobs", `{"kind":"k","run_at":"tomorrow at noon"}`, "", 400, "invalid_field", "run_at"},
		{"run_at and delay", "POST", "/v1/jobs", `{"kind":"k","run_at":"2030-01-01T00:00:00Z","delay":"5m"}`, "", 400, "invalid_field", "run_at"},
		{"args not JSON object", "POST", "/v1/jobs", `{"kind":"k","args":}`, "", 400, "invalid_json", ""},
		{"invalid cron", "POST", "/v1/cron", `{"name":"c","schedule":"every tuesday","job":{"kind":"k"}}`, "", 400, "invalid_field", "schedule"},
		{"never-firing cron", "POST", "/v1/cron", `{"name":"c","schedule":"0 0 30 2 *","job":{"kind":"k"}}`, "", 400, "invalid_field", "schedule"},
		{"invalid time zone", "POST", "/v1/cron", `{"name":"c","schedule":"@daily","timezone":"Atlantis/Capital","job":{"kind":"k"}}`, "", 400, "invalid_field", "timezone"},
		{"invalid missed policy", "POST", "/v1/cron", `{"name":"c","schedule":"@daily","missed":"maybe","job":{"kind":"k"}}`, "", 400, "invalid_field", "missed"},
		{"cron job priority", "POST", "/v1/cron", `{"name":"c","schedule":"@daily","job":{"kind":"k","priority":99}}`, "", 400, "invalid_field", "job.priority"},
		{"cron bad name", "POST", "/v1/cron", `{"name":"no spaces please","schedule":"@daily","job":{"kind":"k"}}`, "", 400, "invalid_field", "name"},
		{"http job without url", "POST", "/v1/jobs", `{"kind":"http","args":{"method":"POST"}}`, "", 400, "invalid_field", "args.url"},
		{"http cron job bad method", "POST", "/v1/cron", `{"name":"c","schedule":"@daily","job":{"kind":"http","args":{"url":"https://x.test","method":"FETCH"}}}`, "", 400, "invalid_field", "job.args.method"},
		{"workflow with a cycle", "POST", "/v1/workflows", `{"name":"w","steps":[{"name":"a","kind":"k","depends_on":["b"]},{"name":"b","kind":"k","depends_on":["a"]}]}`, "", 400, "invalid_field", "steps"},
		{"workflow unknown dependency", "POST", "/v1/workflows", `{"name":"w","steps":[{"name":"a","kind":"k","depends_on":["ghost"]}]}`, "", 400, "invalid_field", "steps[0].depends_on"},
		{"workflow duplicate step", "POST", "/v1/workflows", `{"name":"w","steps":[{"name":"a","kind":"k"},{"name":"a","kind":"k"}]}`, "", 400, "invalid_field", "steps[1].name"},
		{"workflow step inputs over budget", "POST", "/v1/workflows", wide, "", 400, "step_inputs_over_budget", "steps[33].depends_on"},
		{"workflow no steps", "POST", "/v1/workflows", `{"name":"w","steps":[]}`, "", 400, "invalid_field", "steps"},
		{"workflow bad sleep", "POST", "/v1/workflows", `{"name":"w","steps":[{"name":"s","sleep":"soon"}]}`, "", 400, "invalid_field", "steps[0].sleep"},
		{"workflow step unknown field", "POST", "/v1/workflows", `{"name":"w","steps":[{"name":"s","kind":"k","retries":3}]}`, "", 400, "unknown_field", "retries"},
		{"signal without step", "POST", "/v1/workflows/1/signal", `{"payload":1}`, "", 400, "invalid_field", "step"},
		{"bad workflow state", "GET", "/v1/workflows?state=done", ``, "", 400, "invalid_parameter", "state"},
		{"bad limit", "GET", "/v1/jobs?limit=0", ``, "", 400, "invalid_parameter", "limit"},
		{"bad state", "GET", "/v1/jobs?state=done", ``, "", 400, "invalid_parameter", "state"},
		{"bad queue filter", "GET", "/v1/jobs?queue=Not%20OK", ``, "", 400, "invalid_parameter", "queue"},
		{"bad kind filter", "GET", "/v1/jobs?kind=a%20b", ``, "", 400, "invalid_parameter", "kind"},
		{"bad cursor", "GET", "/v1/jobs?cursor=!!", ``, "", 400, "invalid_parameter", "cursor"},
		{"bad job id", "GET", "/v1/jobs/abc", ``, "", 400, "invalid_parameter", "id"},
		{"bad failed_after", "GET", "/v1/dlq?failed_after=yesterday", ``, "", 400, "invalid_parameter", "failed_after"},
		{"bad n", "GET", "/v1/cron/c/next?n=0", ``, "", 400, "invalid_parameter", "n"},
		{"bad queue name", "POST", "/v1/queues/Not%20OK/pause", ``, "", 400, "invalid_parameter", "queue"},
		{"replay unknown entry", "POST", "/v1/dlq/999/replay", ``, "", 404, "not_found", ""},
		{"drain unknown node", "POST", "/v1/nodes/ghost/drain", `{"deadline":"10s"}`, "", 404, "not_found", ""},
		{"drain deadline negative", "POST", "/v1/nodes/ghost/drain", `{"deadline":"-1s"}`, "", 400, "invalid_field", "deadline"},
		// Text jsonb cannot hold, anywhere in a body: 400, not a 500 from
		// the database.
		{"invalid UTF-8 in args", "POST", "/v1/jobs", "{\"kind\":\"k\",\"args\":{\"a\":\"\xff\xfe\"}}", "", 400, "invalid_json", ""},
		{"lone surrogate in args", "POST", "/v1/jobs", `{"kind":"k","args":{"a":"\ud800"}}`, "", 400, "invalid_json", ""},
		{"invalid UTF-8 in cron args", "POST", "/v1/cron", "{\"name\":\"c\",\"schedule\":\"@daily\",\"job\":{\"kind\":\"k\",\"args\":[\"\xc3\x28\"]}}", "", 400, "invalid_json", ""},
		{"invalid UTF-8 in step args", "POST", "/v1/workflows", "{\"name\":\"w\",\"steps\":[{\"name\":\"a\",\"kind\":\"k\",\"args\":{\"x\":\"\xed\xa0\x80\"}}]}", "", 400, "invalid_json", ""},
		{"invalid UTF-8 in http body", "POST", "/v1/jobs", "{\"kind\":\"http\",\"args\":{\"url\":\"https://x.test\",\"body\":\"\xff\"}}", "", 400, "invalid_json", ""},
		{"lone surrogate in signal payload", "POST", "/v1/workflows/1/signal", `{"step":"s","payload":"\udfff"}`, "", 400, "invalid_json", ""},
		{"invalid UTF-8 in unique_key", "POST", "/v1/jobs", "{\"kind\":\"k\",\"unique_key\":\"k\xff\"}", "", 400, "invalid_json", ""},
		{"escaped lone surrogate in unique_key", "POST", "/v1/jobs", `{"kind":"k","unique_key":"k\udc00"}`, "", 400, "invalid_json", ""},
		{"http header name not a token", "POST", "/v1/jobs", `{"kind":"http","args":{"url":"https://x.test","headers":{"X Bad(":"v"}}}`, "", 400, "invalid_field", "args.headers"},
		{"http header value with a control", "POST", "/v1/jobs", `{"kind":"http","args":{"url":"https://x.test","headers":{"X-A":"a\u0007b"}}}`, "", 400, "invalid_field", "args.headers"},
		{"http header value with DEL", "POST", "/v1/cron", `{"name":"c","schedule":"@daily","job":{"kind":"http","args":{"url":"https://x.test","headers":{"X-A":"\u007f"}}}}`, "", 400, "invalid_field", "job.args.headers"},
		{"zero run_at", "POST", "/v1/jobs", `{"kind":"k","run_at":"0001-01-01T00:00:00Z"}`, "", 400, "invalid_field", "run_at"},
		{"ancient run_at", "POST", "/v1/jobs", `{"kind":"k","run_at":"0001-01-02T00:00:00Z"}`, "", 400, "invalid_field", "run_at"},
		{"far future run_at", "POST", "/v1/jobs", `{"kind":"k","run_at":"9999-01-01T00:00:00Z"}`, "", 400, "invalid_field", "run_at"},
		{"semicolon in query", "GET", "/v1/jobs?state=failed;queue=x", ``, "", 400, "invalid_parameter", ""},
		{"bad escape in query", "GET", "/v1/jobs?state=%zz", ``, "", 400, "invalid_parameter", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var headers []string
			if c.contentType != "" {
				headers = []string{"Content-Type", c.contentType}
			}
			var body any
			if c.body != "" || c.method == "POST" {
				body = c.body
			}
			r := e.do(e.admin, c.method, c.path, body, headers...)
			p := e.expectProblem(r, c.status, c.code)
			if p.Field != c.field {
				t.Errorf("field %q, want %q (%s)", p.Field, c.field, p.Detail)
			}
			if p.Detail == "" {
				t.Error("no detail")
			}
		})
	}
	e.expectProblem(e.doUnrouted(e.admin, "GET", "/v1/frobs"), 404, "not_found")
	e.expectProblem(e.doUnrouted(e.admin, "PUT", "/v1/jobs"), 405, "method_not_allowed")
	for table, n := range map[string]int{"jobs": 0, "cron_entries": 0, "dlq": 0, "queues": 0, "workflow_runs": 0} {
		if got := e.count(fmt.Sprintf(`SELECT count(*) FROM gaffer.%s`, table)); got != n {
			t.Errorf("gaffer.%s has %d rows after rejected requests", table, got)
		}
	}
}
