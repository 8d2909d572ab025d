#!/bin/sh
# Measures a gaffer node's peak memory (VmHWM of the `gaffer server`
# process) while it answers the largest list page (GET /v1/jobs?limit=1000)
# and the largest remote claim (POST /v1/work/claim, max 1000) the API
# allows, on a throwaway PostgreSQL started from the local binaries, on
# loopback. Each answer is measured on a freshly started node, so that
# one's peak does not hide the other's.
#
# Usage: scripts/response-memory.sh GAFFER_BINARY [JOBS] [ARGS_BYTES]
#   GAFFER_BINARY  a built gaffer (go build -o /tmp/gaffer ./cmd/gaffer):
#                  build one from each commit to compare them
#   JOBS           jobs enqueued, default 1000 (one full page, one full claim)
#   ARGS_BYTES     each job's args, default 262144 (the cap is 1048576)
# Extra server flags (e.g. --max-response-bytes 1048576) go in
# GAFFER_SERVER_FLAGS. Runs as root (the server runs as postgres) or as
# an ordinary user.
set -eu
gaffer=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
jobs=${2:-1000}
size=${3:-262144}
bin=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
[ -n "$bin" ] || bin=$(dirname "$(command -v pg_ctl)")
dir=$(mktemp -d /tmp/gaffer-respmem-XXXXXX)
port=$((20000 + $$ % 20000))
api=$((port + 1))
as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$dir"
as_pg "'$bin/initdb' -D '$dir/data' -U postgres -A trust >/dev/null"
as_pg "'$bin/pg_ctl' -D '$dir/data' -l '$dir/log' -w -o \"-c port=$port -c listen_addresses=127.0.0.1 -c unix_socket_directories=''\" start >/dev/null"
node=
cleanup() {
	[ -n "$node" ] && kill "$node" 2>/dev/null && wait "$node" 2>/dev/null
	as_pg "\"$bin/pg_ctl\" -D \"$dir/data\" -m immediate stop >/dev/null"
	rm -rf "$dir"
}
trap cleanup EXIT
export DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
"$gaffer" migrate up >/dev/null
token=$("$gaffer" tokens create --name bench --tenant '*' --scopes admin | tr -d '[:space:]')
# The jobs, in a queue no node works: written by SQL, as enqueueing a
# gigabyte over the API only measures the enqueue.
# The padding is hex of random numbers, which compresses about as real
# payloads do (a run of one letter would be stored in a few bytes).
psql -X -q "$DATABASE_URL" -c "INSERT INTO gaffer.jobs (kind, queue, args)
	SELECT 'bench', 'respmem', json_build_object('n', i, 'pad', (SELECT string_agg(md5(random()::text || i || k), '')
		FROM generate_series(1, $size / 32) k)) FROM generate_series(1, $jobs) i"

start_node() {
	# shellcheck disable=SC2086 # GAFFER_SERVER_FLAGS is a list of flags
	"$gaffer" server --node-id respmem --addr "127.0.0.1:$api" --queues default=1 --log-level warn ${GAFFER_SERVER_FLAGS:-} 2>"$dir/node.log" &
	node=$!
	i=0
	until curl -fsS "http://127.0.0.1:$api/readyz" >/dev/null 2>&1; do
		i=$((i + 1))
		[ $i -lt 300 ] || { cat "$dir/node.log"; exit 1; }
		sleep 0.1
	done
}
stop_node() { kill "$node"; wait "$node" 2>/dev/null || true; node=; }
hwm() { awk '/VmHWM/ {print int($2 / 1024) " MiB"}' "/proc/$node/status"; }
# measure NAME METHOD PATH [BODY]: the answer's size and time, and the
# node's peak memory before and after it.
measure() {
	before=$(hwm)
	out=$(curl -sS -o /dev/null -w '%{http_code} %{size_download} %{time_total}' -X "$2" -H "Authorization: Bearer $token" \
		-H 'Content-Type: application/json' ${4:+--data "$4"} "http://127.0.0.1:$api$3")
	set -- "$1" $out
	printf '%-6s status %s, %s bytes in %ss; peak RSS %s before, %s after\n' "$1" "$2" "$3" "$4" "$before" "$(hwm)"
}
echo "$jobs jobs of $size bytes of args; $("$gaffer" version 2>/dev/null | head -1)"
start_node
measure list GET "/v1/jobs?queue=respmem&limit=1000"
stop_node
start_node
worker=$(curl -fsS -X POST -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
	--data '{"name":"respmem","queues":["respmem"]}' "http://127.0.0.1:$api/v1/workers" | sed 's/.*"id":"\([^"]*\)".*/\1/')
measure claim POST /v1/work/claim "{\"worker\":\"$worker\",\"max\":1000}"
echo "jobs running after the claim: $(psql -X -At "$DATABASE_URL" -c "SELECT count(*) FROM gaffer.jobs WHERE queue = 'respmem' AND state = 'running'")"
stop_node
