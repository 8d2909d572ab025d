# Generates openapi.json: python3 api/gen_openapi.py api/openapi.json
# Edit this file, not the JSON, then run the command above; the API tests
# check every live response against the result.
import json
def ref(n): return {"$ref": "#/components/schemas/"+n}
def arr(x): return {"type":"array","items":x}
S=lambda **k: dict(type="string", **k)
I=lambda **k: dict(type="integer", **k)
T=lambda **k: dict(type="string", format="date-time", **k)
B={"type":"boolean"}
def B_(description): return {"type":"boolean","description":description}
N={"type":"number"}
ANY={}  # any JSON value
def obj(props, req=(), extra=False):
    o={"type":"object","properties":props}
    if req: o["required"]=list(req)
    if not extra: o["additionalProperties"]=False
    return o
schemas={
 "Problem": obj({"type":S(),"title":S(),"status":I(),"detail":S(),"code":S(enum=["invalid_json","unknown_field","invalid_field","invalid_parameter","body_too_large","unsupported_media_type","unauthorized","forbidden","not_found","method_not_allowed","conflict","already_exists","already_replayed","job_finished","not_retryable","destination_not_allowed","idempotency_key_reused","idempotency_key_in_progress","rate_limited","internal_error","unavailable","lease_lost","worker_gone","too_many_workers"]),"field":S()},["type","title","status","code"]),
 "AttemptError": obj({"attempt":I(),"at":T(),"error":S(),"kind":S(enum=["error","panic","timeout","unknown_kind","lost","released","cancelled","destination_blocked","omitted"]),"node":S(),"stack":S(),"omitted":I()},["attempt","at","error","kind"]),
 "Job": obj({"id":I(format="int64"),"tenant":S(),"kind":S(),"queue":S(),"state":S(enum=["pending","running","retrying","completed","failed","cancelled"]),
   "priority":I(minimum=0,maximum=9),"attempt":I(),"max_attempts":I(),"timeout":S(description="Go duration, e.g. 30s"),"run_at":T(),"created_at":T(),
   "attempted_at":T(),"finalized_at":T(),"node":S(),"unique_key":S(),"replay_of":I(format="int64"),"args":ANY,"result":ANY,
   "errors":arr(ref("AttemptError")),"cancel_requested":B,"cron_entry":S(),"cron_at":T(),
   "workflow_run":I(format="int64"),"step":S(),"inputs":dict(type="object",description="a workflow step's dependencies' results, by step name"),
   "fairness_key":S(description="with the tenant, the job's fairness unit: claims serve a queue's units in turn"),
   "limit_key":S(description="the key limits keyed on limit_key count the job under"),
   "progress":ref("Progress")},
   ["id","tenant","kind","queue","state","priority","attempt","max_attempts","run_at","created_at","args","errors","cancel_requested"]),
 "Progress": obj({"percent":N,"message":S(),"attempt":I(description="the attempt that reported it"),"at":T()},["percent","message","attempt","at"]),
 "EnqueueRequest": obj({"kind":S(),"args":ANY,"tenant":S(),"queue":S(pattern="^[a-z0-9][a-z0-9_.-]{0,63}$"),"priority":I(minimum=0,maximum=9),
   "run_at":T(),"delay":S(description="Go duration, e.g. 5m"),"max_attempts":I(minimum=1,maximum=1000),"timeout":S(),"unique_key":S(maxLength=255),
   "fairness_key":S(maxLength=255,description="splits the tenant's jobs of the queue into units served in turn; an http job's default is its destination host"),
   "limit_key":S(maxLength=255,description="counted by limits keyed on limit_key")},["kind"]),
 "EnqueueResponse": obj({"job":ref("Job"),"existing":B},["job","existing"]),
 "JobList": obj({"data":arr(ref("Job")),"next_cursor":S()},["data"]),
 "DLQEntry": obj({"id":I(format="int64"),"tenant":S(),"job_id":I(format="int64"),"kind":S(),"queue":S(),"priority":I(),"max_attempts":I(),"attempts":I(),
   "args":ANY,"errors":arr(ref("AttemptError")),"reason":S(enum=["exhausted","permanent","lost"]),"failed_at":T(),"replayed_at":T(),"replay_job_id":I(format="int64"),
   "workflow_run":I(format="int64"),"step":S(),"inputs":ANY,
   "fairness_key":S(description="with the tenant, the job's fairness unit: claims serve a queue's units in turn"),
   "limit_key":S(description="the key limits keyed on limit_key count the job under")},
   ["id","tenant","job_id","kind","queue","priority","max_attempts","attempts","args","errors","reason","failed_at"]),
 "DLQList": obj({"data":arr(ref("DLQEntry")),"next_cursor":S()},["data"]),
 "DLQFilter": obj({"tenant":S(),"queue":S(),"kind":S(),"failed_after":T(),"failed_before":T(),"error":S(description="case-insensitive text in any attempt's error"),"limit":I(minimum=0,maximum=100000)}),
 "Replay": obj({"entry_id":I(format="int64"),"job_id":I(format="int64")},["entry_id","job_id"]),
 "ReplayedResponse": obj({"replayed":arr(ref("Replay"))},["replayed"]),
 "PurgedResponse": obj({"deleted":I(format="int64")},["deleted"]),
 "CronJob": obj({"kind":S(),"queue":S(),"args":ANY,"priority":I(minimum=0,maximum=9),"max_attempts":I(minimum=0,maximum=1000),"timeout":S()},["kind"]),
 "CronEntry": obj({"tenant":S(),"name":S(),"schedule":S(),"timezone":S(),"job":ref("CronJob"),"missed":S(enum=["skip","once","all"]),"missed_cap":I(),
   "overlap":S(enum=["allow","skip"]),"paused":B,"next_run_at":T(nullable=True,description="the next instant not yet handled; null once the entry is done"),
   "done":B_("a one-shot (@at) entry whose occurrence was handled: it never fires again unless its schedule changes"),"done_at":T(),
   "last_job_id":I(format="int64",description="the job of the last occurrence that made one (triggers aside)"),
   "last_job_state":S(enum=["pending","running","retrying","completed","failed","cancelled"],description="that job's state now; absent once retention deleted it"),
   "last_occurrence_at":T(description="the instant that occurrence was scheduled for"),"last_fired_at":T(description="when the leader made its job (the database clock)"),
   "last_error":S(description="the last error the scheduler met firing this entry; kept after it recovers"),"last_error_at":T(),
   "consecutive_failures":I(minimum=0,description="firings that failed since the last that worked: 0 when healthy"),
   "retry_at":T(description="a failing entry is tried again no sooner than this"),
   "created_at":T(),"updated_at":T()},
   ["tenant","name","schedule","timezone","job","missed","missed_cap","overlap","paused","next_run_at","done","consecutive_failures","created_at","updated_at"]),
 "CronCreate": obj({"tenant":S(),"name":S(),"schedule":S(description="5 or 6 fields, @daily-style descriptors, @every <duration>, or @at <time> (once: RFC 3339 with an offset, or a local time such as 2027-01-01T09:00 in the entry's zone)"),"timezone":S(description="IANA name or fixed offset; default UTC"),
   "job":ref("CronJob"),"missed":S(enum=["skip","once","all"]),"missed_cap":I(minimum=0,maximum=10000),"overlap":S(enum=["allow","skip"]),"paused":B},["name","schedule","job"]),
 "CronPatch": obj({"schedule":S(),"timezone":S(),"job":ref("CronJob"),"missed":S(enum=["skip","once","all"]),"missed_cap":I(minimum=1,maximum=10000),"overlap":S(enum=["allow","skip"]),"paused":B}),
 "CronPut": obj({"name":S(description="optional; must be the path's"),"schedule":S(description="as for POST /v1/cron"),"timezone":S(description="IANA name or fixed offset; default UTC"),
   "job":ref("CronJob"),"missed":S(enum=["skip","once","all"]),"missed_cap":I(minimum=0,maximum=10000),"overlap":S(enum=["allow","skip"]),
   "paused":B_("left out: an existing entry stays paused or active as it is; a new one is active")},["schedule","job"]),
 "CronPutResponse": obj({"entry":ref("CronEntry"),"created":B,"changed":B_("false: the entry already was as asked and nothing was written"),
   "changes":arr(S(enum=["schedule","timezone","job.kind","job.queue","job.args","job.priority","job.max_attempts","job.timeout","missed","missed_cap","overlap","paused"])),
   "dry_run":B},["entry","created","changed","changes","dry_run"]),
 "CronList": obj({"data":arr(ref("CronEntry")),"next_cursor":S()},["data"]),
 "NextTimes": obj({"times":arr(T())},["times"]),
 "Occurrence": obj({"scheduled_at":T(),"status":S(enum=["fired","skipped","missed","triggered"]),"reason":S(),"count":I(),"recorded_at":T(),"epoch":I(format="int64"),"job_id":I(format="int64")},["scheduled_at","status","count","recorded_at"]),
 "OccurrenceList": obj({"data":arr(ref("Occurrence")),"next_cursor":S()},["data"]),
 "TriggerResponse": obj({"job_id":I(format="int64")},["job_id"]),
 "Queue": obj({"name":S(),"paused":B,"pending":I(format="int64"),"retrying":I(format="int64"),"running":I(format="int64"),"oldest_due_age_seconds":N},["name","paused","pending","retrying","running","oldest_due_age_seconds"]),
 "QueueList": obj({"data":arr(ref("Queue"))},["data"]),
 "LimitRequest": obj({"queue":S(description="the queue it applies to (absent: any)"),"kind":S(description="the kind (absent: any)"),"tenant":S(description="the tenant (absent: any)"),
   "key":S(description="counted per: absent (one count), tenant, kind, queue, limit_key, fairness_key, args.<field>..., host(args.<field>...)"),
   "concurrency":I(minimum=1,description="at most this many running at once per key"),"rate":I(minimum=1,description="at most this many starts per period per key"),
   "period":S(description="the rate's period, e.g. 1s or 1m"),"burst":I(minimum=1,description="starts allowed at once (default: rate)")}),
 "Limit": obj({"name":S(),"queue":S(),"kind":S(),"tenant":S(),"key":S(),"concurrency":I(),"rate":I(),"period":S(),"burst":I(),
   "created_at":T(),"updated_at":T(),"in_use":I(format="int64",description="running attempts it matches, all keys"),
   "busiest_key_running":I(format="int64",description="running attempts of its busiest key"),
   "due":I(format="int64",description="due, unclaimed jobs it matches (counted up to 10,000)"),
   "keys":arr(obj({"key":S(),"running":I(format="int64")},["key","running"]))},["name","created_at","updated_at","in_use","busiest_key_running","due","keys"]),
 "LimitList": obj({"data":arr(ref("Limit"))},["data"]),
 "TenantWeight": obj({"tenant":S(),"weight":I(minimum=1,maximum=1000)},["tenant","weight"]),
 "TenantWeightRequest": obj({"weight":I(minimum=1,maximum=1000)},["weight"]),
 "TenantWeightList": obj({"data":arr(ref("TenantWeight"))},["data"]),
 "WebhookSecret": obj({"id":S(),"tenant":S(),"created_at":T(),"expires_at":T(description="set once a newer secret replaced this one: it signs beside the new one until then")},["id","tenant","created_at"]),
 "WebhookSecretList": obj({"data":arr(ref("WebhookSecret"))},["data"]),
 "NewWebhookSecret": obj({"id":S(),"tenant":S(),"created_at":T(),"secret":S(description="whsec_ and the base64 of the key: shown only in this answer")},["id","tenant","created_at","secret"]),
 "RotateWebhookSecret": obj({"tenant":S(description="tokens spanning tenants only"),"grace":S(description="how long the previous secret keeps signing, e.g. 24h (default)")}),
 "QueueState": obj({"name":S(),"paused":B},["name","paused"]),
 "Node": obj({"id":S(),"hostname":S(),"version":S(),"queues":{"type":"object","additionalProperties":I()},"state":S(enum=["active","draining","dead"]),
   "in_flight":I(),"leader":B,"started_at":T(),"last_seen":T(),"seconds_since_seen":N,"drain_requested_at":T(),"drain_deadline":T(),"drained_at":T(),"left_at":T(),
   "left_reason":S(enum=["drained","stopped","lost"]),"kind":S(enum=["node","remote"],description="remote: a remote worker (it claims over HTTP; its queues show 0)"),
   "tenant":S(description="a remote worker's tenant (\"*\": every tenant's jobs)"),"kinds":arr(S())},["id","hostname","version","queues","state","in_flight","leader","started_at","last_seen","seconds_since_seen","kind"]),
 "NodeList": obj({"data":arr(ref("Node"))},["data"]),
 "DrainRequest": obj({"deadline":S(description="Go duration, 0s to 24h; default 30s")}),
 "WorkflowStepCreate": obj({"name":S(),"kind":S(),"args":ANY,"queue":S(),"priority":I(minimum=0,maximum=9),"max_attempts":I(minimum=0,maximum=1000),
   "timeout":S(),"depends_on":arr(S()),"allow_failure":B,"sleep":S(description="a durable timer step of this length"),
   "signal":S(description="a step that waits this long for POST /v1/workflows/{id}/signal")},["name"]),
 "WorkflowCreate": obj({"name":S(),"tenant":S(),"steps":arr(ref("WorkflowStepCreate"))},["name","steps"]),
 "WorkflowStep": obj({"name":S(),"type":S(enum=["job","sleep","signal"]),"kind":S(),"queue":S(),"depends_on":arr(S()),"allow_failure":B,
   "state":S(enum=["waiting","active","completed","failed","cancelled"]),"job_id":I(format="int64"),"attempt":I(),"result":ANY,"error":S(),
   "cancel_reason":S(),"started_at":T(),"finished_at":T()},["name","type","kind","queue","depends_on","allow_failure","state","attempt"]),
 "WorkflowRun": obj({"id":I(format="int64"),"tenant":S(),"name":S(),"state":S(enum=["running","completed","failed","cancelled"]),"output":ANY,"error":S(),
   "created_at":T(),"finished_at":T(),"steps":arr(ref("WorkflowStep"))},["id","tenant","name","state","created_at"]),
 "WorkflowList": obj({"data":arr(ref("WorkflowRun")),"next_cursor":S()},["data"]),
 "SignalRequest": obj({"step":S(),"payload":ANY},["step"]),
 "WorkerRegistration": obj({"queues":arr(S()),"kinds":arr(S()),"name":S(maxLength=64),"version":S(maxLength=64),
   "tenant":S(description="tokens spanning tenants only: the tenant whose jobs it works (default: every tenant's)")},["queues"]),
 "Worker": obj({"id":S(),"name":S(),"version":S(),"tenant":S(),"queues":arr(S()),"kinds":arr(S()),"lease_ttl_seconds":N,"heartbeat_interval_seconds":N,"max_wait_seconds":N},
   ["id","name","version","tenant","queues","kinds","lease_ttl_seconds","heartbeat_interval_seconds","max_wait_seconds"]),
 "WorkerLeft": obj({"id":S(),"released":I()},["id","released"]),
 "ClaimRequest": obj({"worker":S(),"max":I(minimum=1,maximum=1000,description="default 1"),"wait":S(description="how long to wait for a job when none is due, e.g. 20s (at most max_wait_seconds; default 0)")},["worker"]),
 "ClaimedJob": obj({"id":I(format="int64"),"tenant":S(),"kind":S(),"queue":S(),"priority":I(),"args":ANY,"inputs":ANY,"attempt":I(),"max_attempts":I(),
   "lease_token":S(description="a 64-bit number as a decimal string: send it back as is"),"lease_expires_at":T(),"timeout":S(),"run_at":T(),"created_at":T(),
   "workflow_run":I(format="int64"),"step":S()},["id","tenant","kind","queue","priority","args","attempt","max_attempts","lease_token","lease_expires_at","run_at","created_at"]),
 "ClaimResponse": obj({"jobs":arr(ref("ClaimedJob")),"draining":B_("the worker was drained: it gets no more jobs; finish those it runs, then stop")},["jobs","draining"]),
 "LeaseRef": obj({"id":I(format="int64"),"attempt":I(),"lease_token":S()},["id","attempt","lease_token"]),
 "HeartbeatRequest": obj({"worker":S(),"jobs":arr(ref("LeaseRef"))},["worker","jobs"]),
 "Completion": obj({"id":I(format="int64"),"attempt":I(),"lease_token":S(),"result":ANY},["id","attempt","lease_token"]),
 "CompleteRequest": obj({"jobs":arr(ref("Completion"))},["jobs"]),
 "Outcome": obj({"id":I(format="int64"),"status":S(enum=["ok","lease_lost","not_found"]),"cancel_requested":B},["id","status"]),
 "Outcomes": obj({"jobs":arr(ref("Outcome"))},["jobs"]),
 "JobHeartbeat": obj({"worker":S(),"attempt":I(),"lease_token":S()},["worker","attempt","lease_token"]),
 "JobHeartbeatResponse": obj({"id":I(format="int64"),"cancel_requested":B},["id","cancel_requested"]),
 "JobComplete": obj({"attempt":I(),"lease_token":S(),"result":ANY},["attempt","lease_token"]),
 "JobFail": obj({"attempt":I(),"lease_token":S(),"error":S(),"permanent":B,"retry_after":S(description="retry this long from now instead of the default backoff"),"stack":S()},["attempt","lease_token"]),
 "JobSnooze": obj({"attempt":I(),"lease_token":S(),"delay":S()},["attempt","lease_token","delay"]),
 "JobProgress": obj({"attempt":I(),"lease_token":S(),"percent":N,"message":S(maxLength=256)},["attempt","lease_token","percent"]),
 "JobProgressResponse": obj({"id":I(format="int64"),"percent":N,"message":S()},["id","percent","message"]),
 "JobState": obj({"id":I(format="int64"),"state":S(enum=["pending","running","retrying","completed","failed","cancelled"])},["id","state"]),
 "Cluster": obj({"leader":S(),"epoch":I(format="int64"),"leader_since":T(),"nodes":{"type":"object","additionalProperties":I()},"remote_workers":{"type":"object","additionalProperties":I()},"etcd_connected":B,"degraded":arr(S())},["epoch","nodes","remote_workers","etcd_connected","degraded"]),
}
def resp(desc, schema=None, ct="application/json"):
    r={"description":desc}
    if schema: r["content"]={ct:{"schema":schema}}
    return r
P=ref("Problem")
errs=lambda *codes: {str(c): {"$ref":"#/components/responses/Problem"} for c in codes}
def body(name, required=True): return {"required":required,"content":{"application/json":{"schema":ref(name)}}}
def q(name, schema, desc=""): return {"name":name,"in":"query","schema":schema,"description":desc}
def path(name, schema): return {"name":name,"in":"path","required":True,"schema":schema}
idem={"name":"Idempotency-Key","in":"header","schema":S(maxLength=255),"description":"Same key and body: the first response again. Same key, different body: 422."}
limit=q("limit",I(minimum=1,maximum=1000),"default 100"); cursor=q("cursor",S(),"next_cursor from the previous page")
tenant=q("tenant",S(),"tokens spanning tenants only: restrict to this tenant")
common=(401,403,429,500,503)
def op(summary, scope, responses, params=(), rb=None, post=False, opid=None):
    o={"summary":summary,"operationId":opid,"security":[{"bearer":[scope]}],"parameters":list(params)+([idem] if post else []),"responses":{**responses,**errs(*common)}}
    if rb: o["requestBody"]=rb
    return o
jobid=path("id",I(format="int64",minimum=1)); entryid=path("id",I(format="int64",minimum=1)); cname=path("name",S()); qname=path("queue",S()); nodeid=path("id",S())
paths={
 "/v1/jobs":{
   "post":op("Enqueue a job","jobs:write",{"201":resp("Enqueued",ref("EnqueueResponse")),"200":resp("The unique key is held by an unfinished job: that job, nothing enqueued",ref("EnqueueResponse")),**errs(400,413,415,422,409)},rb=body("EnqueueRequest"),post=True,opid="enqueueJob"),
   "get":op("List jobs, newest first","jobs:read",{"200":resp("Jobs",ref("JobList")),**errs(400)},params=[q("state",S(),"comma-separated states"),q("queue",S()),q("kind",S()),
     q("cron_entry",S(maxLength=128),"the jobs a cron entry of this name made (scheduled and triggered)"),q("workflow_run",I(format="int64",minimum=1),"the jobs of a workflow run's steps"),
     limit,cursor,tenant],opid="listJobs")},
 "/v1/jobs/{id}":{"get":op("Get a job","jobs:read",{"200":resp("The job",ref("Job")),**errs(400,404)},params=[jobid,tenant],opid="getJob")},
 "/v1/jobs/{id}/retry":{"post":op("Run a job again now: a retrying job becomes due at once; a failed job's DLQ entry is replayed into one new job","jobs:write",{"200":resp("The job that will run",obj({"job":ref("Job")},["job"])),**errs(400,404,409,422)},params=[jobid,tenant],post=True,opid="retryJob")},
 "/v1/jobs/{id}/cancel":{"post":op("Cancel a job: at once if pending or retrying; a running job's handler is cancelled within a second","jobs:write",{"200":resp("The job after the request",ref("Job")),**errs(400,404,409,422)},params=[jobid,tenant],post=True,opid="cancelJob")},
 "/v1/dlq":{"get":op("List DLQ entries, newest first","jobs:read",{"200":resp("Entries",ref("DLQList")),**errs(400)},params=[q("queue",S()),q("kind",S()),q("error",S()),q("failed_after",T()),q("failed_before",T()),q("replayed",B),limit,cursor,tenant],opid="listDLQ")},
 "/v1/dlq/{id}":{"get":op("Get a DLQ entry","jobs:read",{"200":resp("The entry",ref("DLQEntry")),**errs(400,404)},params=[entryid,tenant],opid="getDLQEntry"),
   "delete":op("Delete a DLQ entry","jobs:write",{"204":resp("Deleted"),**errs(400,404)},params=[entryid,tenant],opid="deleteDLQEntry")},
 "/v1/dlq/{id}/replay":{"post":op("Replay one entry into one new job; a second replay is refused","jobs:write",{"201":resp("Replayed",ref("Replay")),**errs(400,404,409,422)},params=[entryid,tenant],post=True,opid="replayDLQEntry")},
 "/v1/dlq/replay":{"post":op("Replay every unreplayed entry matching a filter","jobs:write",{"200":resp("Replayed",ref("ReplayedResponse")),**errs(400,413,415,422,409)},rb=body("DLQFilter"),post=True,opid="replayDLQ")},
 "/v1/dlq/purge":{"post":op("Delete every entry matching a filter","jobs:write",{"200":resp("Deleted",ref("PurgedResponse")),**errs(400,413,415,422,409)},rb=body("DLQFilter"),post=True,opid="purgeDLQ")},
 "/v1/cron":{"post":op("Create a cron entry","jobs:write",{"201":resp("Created",ref("CronEntry")),**errs(400,409,413,415,422)},rb=body("CronCreate"),post=True,opid="createCron"),
   "get":op("List cron entries","jobs:read",{"200":resp("Entries",ref("CronList")),**errs(400)},params=[limit,cursor,tenant],opid="listCron")},
 "/v1/cron/{name}":{"get":op("Get a cron entry","jobs:read",{"200":resp("The entry",ref("CronEntry")),**errs(404)},params=[cname,tenant],opid="getCron"),
   "put":op("Create or replace a cron entry's definition: idempotent (the same body twice changes nothing the second time, and says so)","jobs:write",
     {"201":resp("Created",ref("CronPutResponse")),"200":resp("Replaced, unchanged, or (dry_run) what would be",ref("CronPutResponse")),**errs(400,413,415)},
     params=[cname,q("tenant",S(),"tokens spanning tenants only: the entry's tenant (default \"default\")"),q("dry_run",B,"check and report; write nothing")],rb=body("CronPut"),opid="putCron"),
   "patch":op("Change a cron entry (pause with {\"paused\": true})","jobs:write",{"200":resp("The entry",ref("CronEntry")),**errs(400,404,413,415)},params=[cname,tenant],rb=body("CronPatch"),opid="updateCron"),
   "delete":op("Delete a cron entry","jobs:write",{"204":resp("Deleted"),**errs(404)},params=[cname,tenant],opid="deleteCron")},
 "/v1/cron/{name}/next":{"get":op("The next n fire times (RFC 3339, UTC)","jobs:read",{"200":resp("Times",ref("NextTimes")),**errs(400,404)},params=[cname,q("n",I(minimum=1,maximum=1000),"default 5"),tenant],opid="nextCron")},
 "/v1/cron/{name}/history":{"get":op("Occurrence history, newest first","jobs:read",{"200":resp("Occurrences",ref("OccurrenceList")),**errs(400,404)},params=[cname,limit,cursor,tenant],opid="cronHistory")},
 "/v1/cron/{name}/trigger":{"post":op("Enqueue the entry's job now","jobs:write",{"201":resp("Enqueued",ref("TriggerResponse")),**errs(404,409,422)},params=[cname,tenant],post=True,opid="triggerCron")},
 "/v1/workflows":{"post":op("Submit a workflow run: a DAG of steps","jobs:write",{"201":resp("Started",ref("WorkflowRun")),**errs(400,413,415,422,409)},rb=body("WorkflowCreate"),post=True,opid="submitWorkflow"),
   "get":op("List workflow runs, newest first","jobs:read",{"200":resp("Runs",ref("WorkflowList")),**errs(400)},params=[q("state",S(enum=["running","completed","failed","cancelled"])),limit,cursor,tenant],opid="listWorkflows")},
 "/v1/workflows/{id}":{"get":op("A run with its steps' states, attempts, results and timing","jobs:read",{"200":resp("The run",ref("WorkflowRun")),**errs(400,404)},params=[jobid,tenant],opid="getWorkflow")},
 "/v1/workflows/{id}/cancel":{"post":op("Cancel a run: steps not started are cancelled, running steps' handlers are cancelled","jobs:write",{"200":resp("The run",ref("WorkflowRun")),**errs(400,404,409,422)},params=[jobid,tenant],post=True,opid="cancelWorkflow")},
 "/v1/workflows/{id}/signal":{"post":op("Deliver a signal to a waiting signal step; the payload becomes its result","jobs:write",{"200":resp("The run",ref("WorkflowRun")),**errs(400,404,409,413,415,422)},params=[jobid,tenant],rb=body("SignalRequest"),post=True,opid="signalWorkflow")},
 "/v1/webhook-secrets":{
   "post":op("Rotate the tenant's webhook signing secret: a new current secret (its text shown once); the previous one signs beside it for the grace period","jobs:write",{"201":resp("The new secret",ref("NewWebhookSecret")),**errs(400,409,413,415,422)},rb=body("RotateWebhookSecret",False),post=True,opid="rotateWebhookSecret"),
   "get":op("The tenant's webhook secrets that still sign, newest first (without their text)","jobs:read",{"200":resp("Secrets",ref("WebhookSecretList")),**errs(400)},params=[tenant],opid="listWebhookSecrets")},
 "/v1/webhook-secrets/{id}":{"delete":op("Stop a secret signing now","jobs:write",{"204":resp("Deleted"),**errs(400,404)},params=[path("id",S()),tenant],opid="deleteWebhookSecret")},
 "/v1/limits":{"get":op("Every limit with its usage now","cluster:read",{"200":resp("Limits",ref("LimitList"))},opid="listLimits")},
 "/v1/limits/{name}":{
   "get":op("A limit with its usage now","cluster:read",{"200":resp("The limit",ref("Limit")),**errs(404)},params=[path("name",S())],opid="getLimit"),
   "put":op("Create or replace a limit: cluster-wide, enforced by the claim","admin",{"200":resp("Replaced",ref("Limit")),"201":resp("Created",ref("Limit")),**errs(400,413,415)},params=[path("name",S())],rb=body("LimitRequest"),opid="putLimit"),
   "delete":op("Delete a limit","admin",{"204":resp("Deleted"),**errs(404)},params=[path("name",S())],opid="deleteLimit")},
 "/v1/tenants":{"get":op("Tenants whose weight in fair claiming is not the default 1","cluster:read",{"200":resp("Weights",ref("TenantWeightList"))},opid="listTenantWeights")},
 "/v1/tenants/{tenant}":{"put":op("Set a tenant's weight in fair claiming (1-1000, default 1)","admin",{"200":resp("The weight",ref("TenantWeight")),**errs(400,413,415)},params=[path("tenant",S())],rb=body("TenantWeightRequest"),opid="putTenantWeight")},
 "/v1/queues":{"get":op("Queues with unfinished jobs, or ever paused, or worked by a live node; a tenant token sees only the queues where its tenant has unfinished jobs, with its own counts","jobs:read",{"200":resp("Queues",ref("QueueList"))},opid="listQueues")},
 "/v1/queues/{queue}/pause":{"post":op("Pause a queue cluster-wide","admin",{"200":resp("Paused",ref("QueueState")),**errs(400,409,422)},params=[qname],post=True,opid="pauseQueue")},
 "/v1/queues/{queue}/resume":{"post":op("Resume a queue","admin",{"200":resp("Resumed",ref("QueueState")),**errs(400,409,422)},params=[qname],post=True,opid="resumeQueue")},
 "/v1/nodes":{"get":op("Every node the cluster has seen","cluster:read",{"200":resp("Nodes",ref("NodeList"))},opid="listNodes")},
 "/v1/nodes/{id}/drain":{"post":op("Drain a node: it stops claiming, finishes its jobs until the deadline, releases the rest, and leaves","admin",{"200":resp("The node",ref("Node")),**errs(400,404,409,413,415,422)},params=[nodeid],rb=body("DrainRequest",False),post=True,opid="drainNode")},
 "/v1/nodes/{id}/undrain":{"post":op("Withdraw a drain before the node leaves","admin",{"200":resp("The node",ref("Node")),**errs(404,409,422)},params=[nodeid],post=True,opid="undrainNode")},
 "/v1/workers":{"post":op("Register a remote worker: it then claims jobs of its tenant, queues and kinds","worker",{"201":resp("Registered",ref("Worker")),**errs(400,403,409,413,415,422)},rb=body("WorkerRegistration"),post=True,opid="registerWorker")},
 "/v1/workers/{id}":{"delete":op("A remote worker stops: the jobs it still runs are released (run again at once, no attempt used up)","worker",{"200":resp("Left",ref("WorkerLeft")),**errs(404)},params=[path("id",S())],opid="leaveWorker")},
 "/v1/work/claim":{"post":op("Claim up to max jobs, waiting up to wait for one; each under a new lease","worker",{"200":resp("Claimed (none when the wait ended empty)",ref("ClaimResponse")),**errs(400,404,409,413,415,422)},rb=body("ClaimRequest"),post=True,opid="claimWork")},
 "/v1/work/heartbeat":{"post":op("Extend the leases of running attempts; each job has its outcome","worker",{"200":resp("Outcomes",ref("Outcomes")),**errs(400,404,409,413,415,422)},rb=body("HeartbeatRequest"),post=True,opid="heartbeatWork")},
 "/v1/work/complete":{"post":op("Complete attempts with their results; each job has its outcome","worker",{"200":resp("Outcomes",ref("Outcomes")),**errs(400,409,413,415,422)},rb=body("CompleteRequest"),post=True,opid="completeWork")},
 "/v1/work/jobs/{id}/heartbeat":{"post":op("Extend one attempt's lease; 409 lease_lost once it is no longer current","worker",{"200":resp("Extended",ref("JobHeartbeatResponse")),**errs(400,404,409,413,415,422)},params=[jobid],rb=body("JobHeartbeat"),post=True,opid="heartbeatJob")},
 "/v1/work/jobs/{id}/complete":{"post":op("Complete one attempt; 409 lease_lost once it is no longer current","worker",{"200":resp("Completed",ref("JobState")),**errs(400,404,409,413,415,422)},params=[jobid],rb=body("JobComplete"),post=True,opid="completeJob")},
 "/v1/work/jobs/{id}/fail":{"post":op("Fail one attempt: retried, or into the DLQ when permanent or the last; 409 lease_lost once it is no longer current","worker",{"200":resp("The job's state",ref("JobState")),**errs(400,404,409,413,415,422)},params=[jobid],rb=body("JobFail"),post=True,opid="failJob")},
 "/v1/work/jobs/{id}/snooze":{"post":op("Put the job back to pending for delay without using up an attempt; 409 lease_lost once it is no longer current","worker",{"200":resp("The job's state",ref("JobState")),**errs(400,404,409,413,415,422)},params=[jobid],rb=body("JobSnooze"),post=True,opid="snoozeJob")},
 "/v1/work/jobs/{id}/progress":{"post":op("Report how far the attempt got; 409 lease_lost once it is no longer current","worker",{"200":resp("Recorded",ref("JobProgressResponse")),**errs(400,404,409,413,415,422)},params=[jobid],rb=body("JobProgress"),post=True,opid="progressJob")},
 "/v1/cluster":{"get":op("Leader, epoch, node counts, and what is degraded","cluster:read",{"200":resp("Cluster",ref("Cluster"))},opid="getCluster")},
}
doc={"openapi":"3.0.3","info":{"title":"Gaffer API","version":"1.0.0","description":"Jobs, cron, dead letters and cluster control. Every error is application/problem+json with a stable code. Authenticate with Authorization: Bearer <token>; tokens carry scopes jobs:read, jobs:write, cluster:read (nodes and the cluster's state), worker (remote workers: /v1/workers and /v1/work), admin (which implies the others) and belong to one tenant (admin tokens may span tenants: tenant \"*\")."},
 "servers":[{"url":"/"}],"paths":paths,
 "components":{"schemas":schemas,
   "responses":{"Problem":{"description":"An error","content":{"application/problem+json":{"schema":P}}}},
   "securitySchemes":{"bearer":{"type":"http","scheme":"bearer"}}}}
import sys
json.dump(doc, open(sys.argv[1],"w"), indent=1)
