#!/bin/bash
# Alternates River, Gaffer for each measure, 3 rounds; every run under flock.
cd /tmp/river-cmp
echo "session start $(date -u +%FT%T.%3NZ)"
for r in 4 5; do
  for mode in continuous; do
    for sys in river gaffer; do
      # wait (outside the lock, up to 20 min) for foreign CPU load not under the lock to end
      for i in $(seq 1 60); do
        n=$(pgrep -fc 'while :; do :; done|trickle.sh|job.test'); [ "$n" = 0 ] && break
        [ $i = 1 ] && echo "$(date -u +%T) waiting for foreign load ($n procs)"; sleep 20
      done
      flock /tmp/gaffer-bench.lock /tmp/river-cmp/run_one.sh $sys $mode $r
    done
  done
done
echo "session end $(date -u +%FT%T.%3NZ)"
