#!/bin/bash
# usage: run_one.sh river|gaffer backlog|continuous ROUND
# Runs under: flock /tmp/gaffer-bench.lock bash run_one.sh ...
set -u
SYS=$1; MODE=$2; R=$3
BASE=postgres://postgres@127.0.0.1:55432
DB=${SYS}_${MODE}_r${R}
URL="$BASE/$DB?sslmode=disable"
OUT=/tmp/river-cmp/raw/r${R}-${SYS}-${MODE}
RIVER=/tmp/riverbench/river
GAFFER=/tmp/gaffer-river-cmp
PSQL="psql -X -v ON_ERROR_STOP=1"
log(){ echo "# $(date -u +%FT%T.%3NZ) $*"; }
{
log "lock acquired; $SYS $MODE round $R; db $DB"
log "uptime: $(uptime)"
echo "# top CPU consumers before the run:"; ps -eo pid,etime,pcpu,args --sort=-pcpu | head -6 | cut -c1-160
$PSQL "$BASE/postgres" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
if [ $SYS = river ]; then
  $RIVER migrate-up --database-url "$URL"
else
  $GAFFER migrate up --database-url "$URL" | tail -1
  if [ $MODE = continuous ]; then
    # Gaffer's bench deletes the queue's jobs when it ends (bench.Run defers
    # DeleteQueueJobs). Keep them for the size measurement: a BEFORE DELETE
    # row trigger that skips every delete of a job of queue 'bench'. It fires
    # only on DELETE, which the node does not do while measuring
    # (JobRetention 24h).
    $PSQL "$URL" <<'SQL'
CREATE FUNCTION public.keep_bench_jobs() RETURNS trigger LANGUAGE plpgsql AS
$$BEGIN IF old.queue = 'bench' THEN RETURN NULL; END IF; RETURN old; END$$;
CREATE TRIGGER zz_keep_bench_jobs BEFORE DELETE ON gaffer.jobs FOR EACH ROW EXECUTE FUNCTION public.keep_bench_jobs();
SQL
  fi
fi
$PSQL "$BASE/postgres" -c CHECKPOINT
} > $OUT.setup.txt 2>&1

vmstat -n 2 > $OUT.vmstat.txt 2>&1 & VM=$!
START=$(date -u +%FT%T.%3NZ)
if [ $SYS = river ]; then
  if [ $MODE = backlog ]; then CMD=($RIVER bench --database-url "$URL" --num-total-jobs 1000000)
  else CMD=($RIVER bench --database-url "$URL" --duration 60s); fi
else
  if [ $MODE = backlog ]; then CMD=($GAFFER bench backlog --jobs 1000000 --batch 20000 --database-url "$URL" --json)
  else CMD=($GAFFER bench continuous --duration 60s --database-url "$URL" --json); fi
fi
{ echo "# command: ${CMD[*]}"; echo "# start: $START"; } > $OUT.txt
/usr/bin/time -v "${CMD[@]}" >> $OUT.txt 2> $OUT.stderr.txt
RC=$?
END=$(date -u +%FT%T.%3NZ)
kill $VM
echo "# end: $END rc=$RC" >> $OUT.txt

if [ $MODE = continuous ]; then
  if [ $SYS = river ]; then T=public.river_job; else T=gaffer.jobs; fi
  SIZES="SELECT pg_total_relation_size('$T') AS total_bytes, pg_relation_size('$T') AS heap_bytes, pg_indexes_size('$T') AS indexes_bytes, pg_total_relation_size('$T')-pg_relation_size('$T')-pg_indexes_size('$T') AS toast_fsm_vm_bytes"
  IDX="SELECT indexrelid::regclass AS index, pg_relation_size(indexrelid) AS bytes FROM pg_index WHERE indrelid = '$T'::regclass ORDER BY 1::text"
  STATES="SELECT state, count(*) FROM $T GROUP BY state ORDER BY state"
  STATS="SELECT n_live_tup, n_dead_tup, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del, last_autovacuum, autovacuum_count, last_autoanalyze, autoanalyze_count, last_vacuum, vacuum_count FROM pg_stat_user_tables WHERE relid = '$T'::regclass"
  {
  echo "# measured right after the run ($(date -u +%FT%T.%3NZ)), table $T"
  $PSQL "$URL" -c "$SIZES" -c "$IDX" -c "$STATES" -c "$STATS" \
     -c "SELECT avg(pg_column_size(t.*)) AS avg_row_bytes, count(*) AS rows FROM $T t" \
     -c "SELECT pg_size_pretty(pg_total_relation_size('$T'))"
  echo "# VACUUM $T ($(date -u +%FT%T.%3NZ))"
  $PSQL "$URL" -c "\\timing on" -c "VACUUM $T"
  echo "# after VACUUM ($(date -u +%FT%T.%3NZ))"
  $PSQL "$URL" -c "$SIZES" -c "$IDX" -c "$STATS"
  } > $OUT.sizes.txt 2>&1
fi
$PSQL "$BASE/postgres" -c "DROP DATABASE $DB" > /dev/null 2>> $OUT.setup.txt
echo "$SYS $MODE r$R rc=$RC $START $END"
