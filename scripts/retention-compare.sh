#!/bin/sh
# Compares batched deletes of finished jobs with dropping a partition of
# them (scripts/retention-compare.sql) on a throwaway PostgreSQL started
# from the local binaries with the bench's settings (fsync on,
# shared_buffers=1GB), on loopback. Usage: scripts/retention-compare.sh [ROWS]
# Runs as root (the server runs as postgres) or as an ordinary user.
set -eu
rows=${1:-2000000}
here=$(cd "$(dirname "$0")" && pwd)
# The server's own directory, where initdb, pg_ctl, psql and pg_dump sit beside it.
bin=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
[ -n "$bin" ] || bin=$(dirname "$(command -v pg_ctl)")
dir=$(mktemp -d /tmp/gaffer-retention-XXXXXX)
port=$((20000 + $$ % 20000))
as_pg() { if [ "$(id -u)" = 0 ]; then su postgres -s /bin/sh -c "$*"; else sh -c "$*"; fi; }
[ "$(id -u)" = 0 ] && chown postgres "$dir"
as_pg "'$bin/initdb' -D '$dir/data' -U postgres -A trust >/dev/null"
as_pg "'$bin/pg_ctl' -D '$dir/data' -l '$dir/log' -w -o \"-c port=$port -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c shared_buffers=1GB -c max_wal_size=8GB\" start >/dev/null"
trap 'as_pg "\"$bin/pg_ctl\" -D \"$dir/data\" -m immediate stop >/dev/null"; rm -rf "$dir"' EXIT
url="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
(cd "$here/.." && go run ./cmd/gaffer migrate up --database-url "$url" >/dev/null)
"$bin/psql" -X -q "$url" -v n="$rows" -f "$here/retention-compare.sql"
