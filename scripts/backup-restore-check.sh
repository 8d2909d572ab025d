#!/bin/sh
# Backs up the gaffer schema of one throwaway PostgreSQL with pg_dump and
# restores it into a second, then checks on the restored copy what
# docs/operations.md ("Backup and restore") promises: the migrations are
# all there with their checksums, an API token made before the backup
# still works, a pending job is run, a paused queue stays paused, and a
# cron entry keeps firing. Loopback only. Usage: scripts/backup-restore-check.sh
# Runs as root (the servers run as postgres) or as an ordinary user.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
# The server's own directory, where initdb, pg_ctl, psql and pg_dump sit beside it.
bin=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
[ -n "$bin" ] || bin=$(dirname "$(command -v pg_ctl)")
dir=$(mktemp -d /tmp/gaffer-backup-XXXXXX)
gaffer="$dir/gaffer"
(cd "$here/.." && go build -o "$gaffer" ./cmd/gaffer)
as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$dir"
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	for s in a b; do as_pg "'$bin/pg_ctl' -D '$dir/$s' -m immediate stop >/dev/null 2>&1" || true; done
	rm -rf "$dir"
}
trap cleanup EXIT
start_pg() { # name port
	as_pg "'$bin/initdb' -D '$dir/$1' -U postgres -A trust >/dev/null"
	as_pg "'$bin/pg_ctl' -D '$dir/$1' -l '$dir/$1.log' -w -o \"-c port=$2 -c listen_addresses=127.0.0.1 -c unix_socket_directories=''\" start >/dev/null"
	"$bin/createdb" -h 127.0.0.1 -p "$2" -U postgres gaffer
}
pa=$((30000 + $$ % 10000)); pb=$((pa + 1)); api_a=$((pa + 2)); api_b=$((pa + 3))
a="postgres://postgres@127.0.0.1:$pa/gaffer?sslmode=disable"
b="postgres://postgres@127.0.0.1:$pb/gaffer?sslmode=disable"
start_pg a "$pa"
start_pg b "$pb"
wait_api() { for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$1/readyz" >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "API on $1 not ready"; exit 1; }

echo "== source: migrate, a token, jobs, a paused queue, a cron entry"
"$gaffer" migrate up --database-url "$a" >/dev/null
token=$("$gaffer" tokens create --database-url "$a" --name ops --scopes admin 2>/dev/null)
"$gaffer" server --database-url "$a" --addr "127.0.0.1:$api_a" --queues default=10 --log-level warn &
pids="$pids $!"
wait_api "$api_a"
export GAFFER_URL="http://127.0.0.1:$api_a" GAFFER_TOKEN="$token"
"$gaffer" jobs enqueue --kind noop >/dev/null                # runs before the backup
"$gaffer" jobs enqueue --kind noop --queue held >/dev/null   # no node works "held": pending in the backup
"$gaffer" jobs enqueue --kind noop --queue parked >/dev/null # in a paused queue: stays pending
"$gaffer" queues pause parked >/dev/null
"$gaffer" cron add tick --schedule "@every 2s" --kind noop >/dev/null
sleep 3
echo "-- jobs at the backup:"
"$gaffer" jobs list
kill $pids; wait 2>/dev/null || true; pids=""

echo "== backup: pg_dump -Fc -n gaffer"
"$bin/pg_dump" -Fc -n gaffer -f "$dir/gaffer.dump" "$a"
ls -l "$dir/gaffer.dump" | awk '{print "dump bytes:", $5}'

echo "== restore into an empty database: pg_restore --no-owner -d"
"$bin/pg_restore" --no-owner -d "$b" "$dir/gaffer.dump"
"$gaffer" migrate status --database-url "$b"

echo "== the restored copy works"
"$gaffer" server --database-url "$b" --addr "127.0.0.1:$api_b" --queues default=10,held=10,parked=10 --log-level warn &
pids="$pids $!"
wait_api "$api_b"
export GAFFER_URL="http://127.0.0.1:$api_b"
sleep 5
echo "-- jobs (held completed on the restored copy, parked still pending, cron kept firing):"
"$gaffer" jobs list
echo "-- queues:"
"$gaffer" queues list
echo "-- cron:"
"$gaffer" cron list
echo "-- the old token is accepted (the lists above used it); a new enqueue:"
"$gaffer" jobs enqueue --kind noop
