#!/bin/bash
# every 5 s: foreign processes that are not part of this comparison, and load
while :; do
  f=$(ps -eo pid,pcpu,args --sort=-pcpu | grep -vE 'riverbench/river|gaffer-river-cmp|postgres|vmstat|monitor.sh|ps -eo|grep|PID' | awk '$2>20' | cut -c1-120 | tr '\n' ';')
  echo "$(date -u +%T) load=$(cut -d' ' -f1 /proc/loadavg) lock=$(flock -n /tmp/gaffer-bench.lock true && echo free || echo held) hot=[$f]"
  sleep 5
done
