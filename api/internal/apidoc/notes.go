package apidoc

import (
	"github.com/gafferhq/gaffer/cron"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/workflow"
)

// componentNames names the component of every struct a request or
// response body holds, by its Go type. The names are the API's: clients
// generated from the document know them.
var componentNames = map[string]string{
	"api.Problem": "Problem",

	"api.enqueueRequest":  "EnqueueRequest",
	"api.enqueueResponse": "EnqueueResponse",
	"api.debounceRequest": "Debounce",
	"api.retryResponse":   "RetryResponse",
	"api.jobView":         "Job",
	"job.AttemptError":    "AttemptError",

	"dlq.Entry":            "DLQEntry",
	"dlq.Replay":           "Replay",
	"api.dlqFilterBody":    "DLQFilter",
	"api.replayedResponse": "ReplayedResponse",
	"api.purgedResponse":   "PurgedResponse",

	"api.cronCreateBody":  "CronCreate",
	"api.cronPatchBody":   "CronPatch",
	"api.cronPutBody":     "CronPut",
	"api.cronJobBody":     "CronJobRequest",
	"api.cronView":        "CronEntry",
	"api.cronJobView":     "CronJob",
	"api.cronPutResponse": "CronPutResponse",
	"api.nextResponse":    "NextTimes",
	"api.occurrenceView":  "Occurrence",
	"api.triggerResponse": "TriggerResponse",

	"api.workflowBody":     "WorkflowCreate",
	"api.workflowStepBody": "WorkflowStepCreate",
	"api.signalBody":       "SignalRequest",
	"workflow.Run":         "WorkflowRun",
	"workflow.StepState":   "WorkflowStep",

	"api.rotateSecretBody": "RotateWebhookSecret",
	"api.newSecretView":    "NewWebhookSecret",
	"webhook.Secret":       "WebhookSecret",

	"api.limitBody":  "LimitRequest",
	"api.limitView":  "Limit",
	"job.KeyUsage":   "LimitKeyUsage",
	"api.tenantBody": "TenantWeightRequest",
	"api.tenantView": "TenantWeight",

	"api.queueView":   "Queue",
	"api.queueState":  "QueueState",
	"api.nodeView":    "Node",
	"api.drainBody":   "DrainRequest",
	"api.clusterView": "Cluster",
	"job.Progress":    "Progress",

	"api.registerWorkerRequest": "WorkerRegistration",
	"api.workerView":            "Worker",
	"api.leaveResponse":         "WorkerLeft",
	"api.claimRequest":          "ClaimRequest",
	"api.claimedJobView":        "ClaimedJob",
	"api.claimResponse":         "ClaimResponse",
	"api.leaseRef":              "LeaseRef",
	"api.heartbeatRequest":      "HeartbeatRequest",
	"api.completionRef":         "Completion",
	"api.completeRequest":       "CompleteRequest",
	"api.outcomeView":           "Outcome",
	"api.outcomesResponse":      "Outcomes",
	"api.jobHeartbeatRequest":   "JobHeartbeat",
	"api.jobHeartbeatResponse":  "JobHeartbeatResponse",
	"api.jobCompleteRequest":    "JobComplete",
	"api.jobFailRequest":        "JobFail",
	"api.jobSnoozeRequest":      "JobSnooze",
	"api.jobProgressRequest":    "JobProgress",
	"api.jobProgressResponse":   "JobProgressResponse",
	"api.jobStateResponse":      "JobState",
}

var (
	jobStates    = enum(job.Pending, job.Running, job.Retrying, job.Completed, job.Failed, job.Cancelled)
	missed       = enum(cron.MissedSkip, cron.MissedOnce, cron.MissedAll)
	overlap      = enum(cron.OverlapAllow, cron.OverlapSkip)
	priority     = between(0, 9)
	fairnessKey  = desc("with the tenant, the job's fairness unit: claims serve a queue's units in turn")
	limitKey     = desc("the key limits keyed on limit_key count the job under")
	scheduleText = desc("5 or 6 fields, @daily-style descriptors, @every <duration>, or @at <time> (once: RFC 3339 with an offset, or a local time such as 2027-01-01T09:00 in the entry's zone)")
	timezone     = desc("IANA name or fixed offset; default UTC")
)

// notes say what the Go types cannot: a request's required members, the
// values a string takes, bounds, and words for a reader. A key is
// "Component" or "Component.member"; one naming what does not exist
// fails the build.
// traceParentPattern is the one traceparent form stored with a job
// (job.ParseTraceContext).
const traceParentPattern = `^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`

var notes = map[string][]edit{
	"Job.state":              {jobStates},
	"Job.priority":           {priority},
	"Job.timeout":            {desc("Go duration, e.g. 30s")},
	"Job.uncounted_attempts": {atLeast(0), desc("attempts that did not count against max_attempts: snoozes and releases, each of which raised max_attempts by one; attempt and max_attempts less this are the counted attempt and the budget the job was enqueued with")},
	"Job.inputs":             {object(), desc("a workflow step's dependencies' results, by step name")},
	"Job.fairness_key":       {fairnessKey},
	"Job.limit_key":          {limitKey},
	"Job.traceparent": {pattern(traceParentPattern),
		desc("the W3C traceparent the job was enqueued in (the request's header, or the span of a Go caller's context); every attempt's span links to it")},
	"Job.tracestate": {maxLength(job.MaxTraceStateBytes), desc("the W3C tracestate that came with traceparent")},
	"AttemptError.kind": {enum("error", "panic", "timeout", "unknown_kind", "lost", "released", "cancelled",
		job.KindDestinationBlocked, "omitted")},
	"AttemptError.omitted": {desc("an omitted entry stands for this many attempts: the history keeps the first 3 and the latest")},

	"EnqueueRequest":          {required("kind")},
	"EnqueueRequest.queue":    {pattern(`^[a-z0-9][a-z0-9_.-]{0,63}$`)},
	"EnqueueRequest.priority": {priority},
	"EnqueueRequest.run_at":   {dateTime()},
	"EnqueueRequest.delay":    {desc("Go duration, e.g. 5m")},
	"EnqueueRequest.timeout":  {desc("Go duration, e.g. 30s")},
	"EnqueueRequest.tenant":   {desc("tokens spanning tenants only: the job's tenant (default \"default\")")},
	"EnqueueRequest.unique_key": {maxLength(255),
		desc("while a job with this key is unfinished, enqueueing another answers that job")},
	"EnqueueRequest.unique_states": {items(jobStates), arrayLen(1, 6),
		desc("gives unique_key a window: the key is held by a job enqueued with a window under it that is in one of these states (docs/shaping.md)")},
	"EnqueueRequest.unique_for":   {desc("Go duration, 1s to 8784h (366 days): gives unique_key a window; the key is held by a job enqueued with a window under it for this long from its enqueue, whatever its state (with unique_states, in one of them too)")},
	"Debounce":                    {required("key", "window"), desc("trailing debounce: while a job of the tenant with this key has not started, the enqueue replaces its args and moves it to run window from now (never past its first enqueue + max_wait) and answers it with debounced true (docs/shaping.md)")},
	"Debounce.key":                {maxLength(255)},
	"Debounce.window":             {desc("Go duration, 1ms to 168h")},
	"Debounce.max_wait":           {desc("Go duration, from the window to 720h; absent: no bound")},
	"EnqueueRequest.max_attempts": {between(1, 1000)},
	"EnqueueRequest.fairness_key": {maxLength(255),
		desc("splits the tenant's jobs of the queue into units served in turn; an http job's default is its destination host")},
	"EnqueueRequest.limit_key": {maxLength(255), desc("counted by limits keyed on limit_key")},

	"DLQEntry.reason":         {enum("exhausted", "permanent", "lost")},
	"DLQFilter.failed_after":  {dateTime()},
	"DLQFilter.failed_before": {dateTime()},
	"DLQFilter.error":         {desc("case-insensitive text in any attempt's error")},
	"DLQFilter.limit":         {between(0, 100000), desc("at most this many (0: all)")},
	"DLQFilter.tenant":        {desc("tokens spanning tenants only: restrict to this tenant")},

	"CronJobRequest":              {required("kind")},
	"CronJobRequest.priority":     {priority},
	"CronJobRequest.max_attempts": {between(0, 1000)},
	"CronJobRequest.timeout":      {desc("Go duration, e.g. 30s")},
	"CronCreate":                  {required("name", "schedule", "job")},
	"CronCreate.schedule":         {scheduleText},
	"CronCreate.timezone":         {timezone},
	"CronCreate.missed":           {missed},
	"CronCreate.missed_cap":       {between(0, 10000)},
	"CronCreate.overlap":          {overlap},
	"CronCreate.tenant":           {desc("tokens spanning tenants only: the entry's tenant (default \"default\")")},
	"CronPatch.schedule":          {scheduleText},
	"CronPatch.timezone":          {timezone},
	"CronPatch.missed":            {missed},
	"CronPatch.missed_cap":        {between(0, 10000)},
	"CronPatch.overlap":           {overlap},
	"CronPut":                     {required("schedule", "job")},
	"CronPut.name":                {desc("optional; must be the path's")},
	"CronPut.schedule":            {scheduleText},
	"CronPut.timezone":            {timezone},
	"CronPut.missed":              {missed},
	"CronPut.missed_cap":          {between(0, 10000)},
	"CronPut.overlap":             {overlap},
	"CronPut.paused":              {desc("left out: an existing entry stays paused or active as it is; a new one is active")},

	"CronEntry.missed":      {missed},
	"CronEntry.overlap":     {overlap},
	"CronEntry.next_run_at": {desc("the next instant not yet handled; null once the entry is done, and while it is paused")},
	"CronEntry.done":        {desc("a one-shot (@at) entry whose occurrence was handled: it never fires again unless its schedule changes")},
	"CronEntry.last_job_id": {desc("the job of the last occurrence that made one (triggers aside)")},
	"CronEntry.last_job_state": {jobStates,
		desc("that job's state now; absent once retention deleted it")},
	"CronEntry.last_occurrence_at":   {desc("the instant that occurrence was scheduled for")},
	"CronEntry.last_fired_at":        {desc("when the leader made its job (the database clock)")},
	"CronEntry.last_error":           {desc("the last error the scheduler met firing this entry; kept after it recovers")},
	"CronEntry.consecutive_failures": {atLeast(0), desc("firings that failed since the last that worked: 0 when healthy")},
	"CronEntry.retry_at":             {desc("a failing entry is tried again no sooner than this")},
	"CronEntry.last_failed_job_id":   {desc("the last of the entry's jobs that ended failed (attempts spent, a permanent error, lost on its last attempt); kept after later jobs succeed")},
	"CronEntry.last_failed_error":    {desc("that job's last error")},
	"CronEntry.last_failed_at":       {desc("when that job failed")},
	"CronJob.timeout":                {desc("Go duration, e.g. 30s")},
	"CronPutResponse.changed":        {desc("false: the entry already was as asked and nothing was written")},
	"CronPutResponse.changes": {items(enum("schedule", "timezone", "job.kind", "job.queue", "job.args", "job.priority",
		"job.max_attempts", "job.timeout", "missed", "missed_cap", "overlap", "paused"))},
	"Occurrence.status": {enum("fired", "skipped", "missed", "triggered")},

	"WorkflowCreate":                  {required("name", "steps")},
	"WorkflowCreate.tenant":           {desc("tokens spanning tenants only: the run's tenant (default \"default\")")},
	"WorkflowStepCreate":              {required("name")},
	"WorkflowStepCreate.priority":     {priority},
	"WorkflowStepCreate.max_attempts": {between(0, 1000)},
	"WorkflowStepCreate.timeout":      {desc("Go duration, e.g. 30s")},
	"WorkflowStepCreate.sleep":        {desc("a durable timer step of this length (Go duration)")},
	"WorkflowStepCreate.signal":       {desc("a step that waits this long for POST /v1/workflows/{id}/signal (Go duration)")},
	"SignalRequest":                   {required("step")},
	"WorkflowRun.state":               {enum(workflow.RunStates...)},
	"WorkflowStep.type":               {enum(workflow.TypeJob, workflow.TypeSleep, workflow.TypeSignal)},
	"WorkflowStep.state":              {enum("waiting", "active", "completed", "failed", "cancelled")},

	"RotateWebhookSecret.tenant": {desc("tokens spanning tenants only")},
	"RotateWebhookSecret.grace":  {desc("how long the previous secret keeps signing, e.g. 24h (default)")},
	"NewWebhookSecret.secret":    {desc("whsec_ and the base64 of the key: shown only in this answer")},
	"WebhookSecret.expires_at":   {desc("set once a newer secret replaced this one: it signs beside the new one until then")},

	"LimitRequest.queue":         {desc("the queue it applies to (absent: any)")},
	"LimitRequest.kind":          {desc("the kind (absent: any)")},
	"LimitRequest.tenant":        {desc("the tenant (absent: any)")},
	"LimitRequest.key":           {desc("counted per: absent (one count), tenant, kind, queue, limit_key, fairness_key, args.<field>..., host(args.<field>...)")},
	"LimitRequest.concurrency":   {between(0, job.MaxConcurrency), desc("at most this many running at once per key")},
	"LimitRequest.rate":          {between(0, job.MaxRate), desc("at most this many starts per period per key")},
	"LimitRequest.period":        {desc("the rate's period, e.g. 1s or 1m")},
	"LimitRequest.burst":         {between(0, job.MaxRate), desc("starts allowed at once (default: rate)")},
	"Limit.in_use":               {desc("running attempts it matches, all keys")},
	"Limit.busiest_key_running":  {desc("running attempts of its busiest key")},
	"Limit.due":                  {desc("due, unclaimed jobs it matches (counted up to 10,000)")},
	"TenantWeightRequest":        {required("weight")},
	"TenantWeightRequest.weight": {between(1, 1000)},
	"TenantWeight.weight":        {between(1, 1000)},

	"Queue.oldest_due_age_seconds": {desc("how long the oldest due job has waited")},
	"Node.state":                   {enum("active", "draining", "dead")},
	"Node.tzdata":                  {desc("IANA release of the time zone rules compiled into the node's binary, e.g. 2025c; empty for a binary too old to report it. GET /v1/cluster lists live nodes that disagree under degraded.")},
	"Node.left_reason":             {enum("drained", "stopped", "lost")},
	"DrainRequest.deadline":        {desc("Go duration, 0s to 24h; default 30s")},
	"Node.kind":                    {enum("node", "remote"), desc("remote: a remote worker (it claims over HTTP; its queues show 0)")},
	"Node.tenant":                  {desc(`a remote worker's tenant ("*": every tenant's jobs)`)},
	"Cluster.remote_workers":       {desc("remote workers by state")},

	"Progress.attempt": {desc("the attempt that reported it")},
	"Progress.percent": {between(0, 100)},
	"Progress.message": {maxLength(256)},

	"WorkerRegistration":         {required("queues")},
	"WorkerRegistration.name":    {maxLength(64)},
	"WorkerRegistration.version": {maxLength(64)},
	"WorkerRegistration.tenant":  {desc("tokens spanning tenants only: the tenant whose jobs it works (default: every tenant's)")},
	"ClaimRequest":               {required("worker")},
	"ClaimRequest.worker":        {desc("the id POST /v1/workers returned")},
	"ClaimRequest.max":           {between(1, 1000), desc("default 1")},
	"ClaimRequest.wait":          {desc("how long to wait for a job when none is due, e.g. 20s (at most the worker's max_wait_seconds; default 0)")},
	"ClaimedJob.lease_token":     {desc("a 64-bit number as a decimal string: send it back as is")},
	"ClaimedJob.timeout":         {desc("Go duration, e.g. 30s")},
	"ClaimedJob.traceparent": {pattern(traceParentPattern),
		desc("the W3C traceparent the job was enqueued in: the worker's span of this attempt links to it (or is its child); absent for none")},
	"ClaimedJob.tracestate":  {maxLength(job.MaxTraceStateBytes), desc("the W3C tracestate that came with traceparent")},
	"ClaimResponse.draining": {desc("the worker was drained: it gets no more jobs; finish those it runs, then stop")},
	"LeaseRef":               {required("id", "attempt", "lease_token")},
	"HeartbeatRequest":       {required("worker", "jobs")},
	"Completion":             {required("id", "attempt", "lease_token")},
	"CompleteRequest":        {required("jobs")},
	"Outcome.status":         {enum("ok", "lease_lost", "not_found")},
	"JobHeartbeat":           {required("worker", "attempt", "lease_token")},
	"JobComplete":            {required("attempt", "lease_token")},
	"JobFail":                {required("attempt", "lease_token")},
	"JobFail.retry_after":    {desc("retry this long from now instead of the default backoff (Go duration)")},
	"JobSnooze":              {required("attempt", "lease_token", "delay")},
	"JobSnooze.delay":        {desc("Go duration, e.g. 30s")},
	"JobProgress":            {required("attempt", "lease_token", "percent")},
	"JobProgress.percent":    {between(0, 100)},
	"JobProgress.message":    {maxLength(256)},
	"JobState.state":         {jobStates},
}
