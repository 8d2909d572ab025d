package gaffer

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/store"
)

// Migrate applies every schema migration pool's database lacks and
// returns the versions it applied (none when the schema is current). It
// is what `gaffer migrate up` runs; several processes may call it at once
// (an advisory lock serialises them). A node refuses to start on a schema
// older than it needs, naming the command to run.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	return store.New(pool).MigrateUp(ctx)
}
