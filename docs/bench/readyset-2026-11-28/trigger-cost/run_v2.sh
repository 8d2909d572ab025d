#!/bin/bash
# Interleaved runs: B1 (with,without) C1 (without,with) B2 (without,with) C2 (with,without) B3 (with,without) C3 (without,with)
cd /tmp/readyset-trig
U='postgres://postgres@127.0.0.1:55441/gaffer?sslmode=disable'
BJOBS=${BJOBS:-250000}
mkdir -p runs_v2
set_variant() {
  if [ "$1" = v2 ]; then psql "$U" -q -v ON_ERROR_STOP=1 -f triggers_v2.sql >/dev/null
  else psql "$U" -q -v ON_ERROR_STOP=1 -c "DROP TRIGGER IF EXISTS ready_ins ON gaffer.jobs; DROP TRIGGER IF EXISTS ready_upd ON gaffer.jobs; DROP TRIGGER IF EXISTS ready_del ON gaffer.jobs;"; fi
  psql "$U" -At -c "select string_agg(tgname, ',' order by tgname) from pg_trigger where tgrelid='gaffer.jobs'::regclass and tgname like 'ready_%'" > runs_v2/$2.triggers
}
reset() {
  psql "$U" -q -c "DELETE FROM gaffer.jobs" -c "TRUNCATE gaffer.ready" -c "VACUUM ANALYZE gaffer.jobs" -c "VACUUM ANALYZE gaffer.ready" -c "CHECKPOINT"
}
run() { # mode variant round
  name=$1-$2-r$3
  reset; set_variant $2 $name
  echo "$(date -u +%T) start $name" >> runs_v2/log
  if [ $1 = backlog ]; then
    flock /tmp/gaffer-bench.lock /tmp/gaffer-after bench backlog --jobs $BJOBS --batch 20000 --json --database-url "$U" > runs_v2/$name.json 2> runs_v2/$name.err
  else
    flock /tmp/gaffer-bench.lock /tmp/gaffer-after bench continuous --duration 60s --json --database-url "$U" > runs_v2/$name.json 2> runs_v2/$name.err
  fi
  echo "$(date -u +%T) end $name rc=$?" >> runs_v2/log
  psql "$U" -c "SELECT relname, n_live_tup, n_dead_tup, n_tup_ins, n_tup_upd, n_tup_del, pg_size_pretty(pg_relation_size(relid)) rel, pg_size_pretty(pg_indexes_size(relid)) idx, last_autovacuum, autovacuum_count FROM pg_stat_user_tables WHERE schemaname='gaffer' AND relname IN ('jobs','ready')" \
       -c "SELECT c.relname, pg_size_pretty(pg_relation_size(c.oid)) FROM pg_class c WHERE c.relname IN ('ready','ready_claim_idx','ready_id_idx')" > runs_v2/$name.stats 2>&1
}

run backlog v2 1; run backlog without 1
run continuous without 1; run continuous v2 1
run backlog without 2; run backlog v2 2
run continuous v2 2; run continuous without 2
reset
echo "$(date -u +%T) ALL DONE" >> runs_v2/log
