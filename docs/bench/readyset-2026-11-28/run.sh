#!/bin/bash
# usage: flock /tmp/gaffer-bench.lock bash run.sh <A|B> <R seconds, 0 for A> <run-id>
set -u
D=$1; R=$2; ID=$3
cd /tmp/readyset-exp; . ./env.sh
OUT=/tmp/readyset-exp/runs/$ID; rm -rf $OUT; mkdir -p $OUT; cd $OUT
DUR=${DUR:-145}; HOLD_AT=${HOLD_AT:-20}; EXPLAIN_AT=(${EX1:-15} ${EX2:-105}); HOLD_S=${HOLD_S:-90}
echo "design=$D R=$R id=$ID" > meta.txt

psql -q -f ../../schema_$D.sql >/dev/null 2>&1 || { echo schema failed; exit 1; }
psql -qc "CHECKPOINT"
sleep 2

RUNQ="SELECT id FROM jobs WHERE state = 'pending' AND queue = 'q' AND tenant = 't' ORDER BY priority, run_at, id LIMIT 50 FOR UPDATE SKIP LOCKED"
if [ $D = B ]; then RUNQ="WITH a AS (SELECT 0 AS t, ctid AS tid, id, priority, run_at FROM ready_0 WHERE queue = 'q' AND tenant = 't' ORDER BY priority, run_at, id LIMIT 50 FOR UPDATE SKIP LOCKED),
 b AS (SELECT 1 AS t, ctid AS tid, id, priority, run_at FROM ready_1 WHERE queue = 'q' AND tenant = 't' ORDER BY priority, run_at, id LIMIT 50 FOR UPDATE SKIP LOCKED),
 c AS (SELECT 2 AS t, ctid AS tid, id, priority, run_at FROM ready_2 WHERE queue = 'q' AND tenant = 't' ORDER BY priority, run_at, id LIMIT 50 FOR UPDATE SKIP LOCKED)
SELECT t, tid, id FROM (SELECT * FROM a UNION ALL SELECT * FROM b UNION ALL SELECT * FROM c) u ORDER BY priority, run_at, id LIMIT 50"; fi

# all load sessions re-plan every execution (a generic plan cached while jobs was empty turned the
# completion UPDATE into a seq scan in a smoke test)
export PGOPTIONS="-c plan_cache_mode=force_custom_plan"
T0=$(date +%s.%N); echo "t0=$T0" >> meta.txt
pgbench -n -M prepared -c 2 -j 1 -R 100 -T $DUR -f ../../enqueue_$D.sql -l --log-prefix=enq > enq.out 2>&1 &
PE=$!
pgbench -n -M prepared -c 2 -j 1 -R 240 -T $DUR -D phase=0 -D ids='{}' -f ../../claim_$D.sql -l --log-prefix=clm > clm.out 2>&1 &
PC=$!
if [ $D = B ]; then
  ( while [ ! -f stop ]; do echo "CALL rotate();"; sleep $R; done ) | psql -q -c "SET lock_timeout = '50ms'" -f - > rotator.out 2>&1 &
fi
# cheap 5 s sampler: sizes + stats (the backlog itself is computed afterwards from per-row timestamps)
( while [ ! -f stop ]; do
    psql -XAtqc "SELECT extract(epoch from clock_timestamp()), (SELECT last_value FROM jobs_id_seq),
       pg_relation_size('jobs'), coalesce(pg_relation_size(to_regclass('jobs_claim_idx')),0),
       coalesce(pg_relation_size(to_regclass('ready_0')),0)+coalesce(pg_relation_size(to_regclass('ready_1')),0)+coalesce(pg_relation_size(to_regclass('ready_2')),0),
       coalesce(pg_relation_size(to_regclass('ready_0_claim_idx')),0)+coalesce(pg_relation_size(to_regclass('ready_1_claim_idx')),0)+coalesce(pg_relation_size(to_regclass('ready_2_claim_idx')),0),
       (SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname='jobs'),
       (SELECT max(age(backend_xmin)) FROM pg_stat_activity WHERE backend_xmin IS NOT NULL)" >> sample.txt 2>>sample.err
    sleep 5; done ) &
PS=$!

sleep_until() { local now; now=$(date +%s.%N); local d; d=$(echo "$T0 + $1 - $now" | bc); [ "${d:0:1}" != "-" ] && sleep $d; }

sleep_until ${EXPLAIN_AT[0]}
{ echo "== t=${EXPLAIN_AT[0]} $(date +%s.%N)"; psql -X -c "BEGIN" -c "EXPLAIN (ANALYZE, BUFFERS) $RUNQ" -c "ROLLBACK"; } > explain.txt 2>&1

sleep_until $HOLD_AT
( echo "holder_start=$(date +%s.%N)"
  if [ -n "${HOLDER_READS_READY:-}" ]; then   # extra variant only: holder also reads the ready tables
  psql -X -c "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT txid_current(); SELECT count(*) FROM jobs; SELECT count(*) FROM ready_0; SELECT count(*) FROM ready_1; SELECT count(*) FROM ready_2; SELECT pg_sleep($HOLD_S); COMMIT;"
  else
  psql -X -c "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT txid_current(); SELECT count(*) FROM jobs; SELECT pg_sleep($HOLD_S); COMMIT;"
  fi
  echo "holder_end=$(date +%s.%N)" ) > holder.txt 2>&1 &
PH=$!

sleep_until ${EXPLAIN_AT[1]}
{ echo "== t=${EXPLAIN_AT[1]} $(date +%s.%N)"; psql -X -c "BEGIN" -c "EXPLAIN (ANALYZE, BUFFERS) $RUNQ" -c "ROLLBACK"; } >> explain.txt 2>&1

wait $PE $PC $PH
touch stop; wait
echo "t_end=$(date +%s.%N)" >> meta.txt

# export per-second insert / claim counts (run_at = enqueue txn start; claimed_at set by claim)
psql -XAtq -F, -c "SELECT extract(epoch from date_trunc('second', run_at))::bigint, count(*) FROM jobs GROUP BY 1 ORDER BY 1" > ins_per_s.csv
psql -XAtq -F, -c "SELECT extract(epoch from date_trunc('second', claimed_at))::bigint, count(*) FROM jobs WHERE claimed_at IS NOT NULL GROUP BY 1 ORDER BY 1" > clm_per_s.csv
psql -XAtq -F, -c "SELECT state, count(*) FROM jobs GROUP BY 1" > states.csv
if [ $D = B ]; then
  psql -XAtq -F, -c "SELECT extract(epoch from started), extract(epoch from lock_acquired), extract(epoch from finished), new_cur, truncated, attempts, lock_failures, moved FROM rotation_log ORDER BY started" > rotation_log.csv
  psql -XAtq -F, -c "SELECT (SELECT count(*) FROM ready_0)+(SELECT count(*) FROM ready_1)+(SELECT count(*) FROM ready_2)" > ready_left.csv
fi
echo done
