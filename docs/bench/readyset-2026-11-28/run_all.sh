#!/bin/bash
# interleaved: A, B(R=1), B(R=5), A, B(R=1), B(R=5); each timed run under the shared bench lock
cd /tmp/readyset-exp
for rep in 1 2; do
  for cfg in "A 0" "B 1" "B 5"; do
    set -- $cfg
    id=${1}_R${2}_run${rep}
    echo "$(date +%T) start $id"
    flock /tmp/gaffer-bench.lock bash run.sh $1 $2 $id
    echo "$(date +%T) end $id"
  done
done
