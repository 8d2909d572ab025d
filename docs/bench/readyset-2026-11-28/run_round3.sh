#!/bin/bash
# third interleaved round, reversed order: B(R=5), B(R=1), A
cd /tmp/readyset-exp
while pgrep -f "bash run_all.sh" >/dev/null; do sleep 5; done
for cfg in "B 5" "B 1" "A 0"; do
  set -- $cfg
  id=${1}_R${2}_run3
  echo "$(date +%T) start $id"
  flock /tmp/gaffer-bench.lock bash run.sh $1 $2 $id
  echo "$(date +%T) end $id"
done
