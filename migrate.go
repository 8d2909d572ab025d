package gaffer

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/store"
)

// Migrate applies every schema migration pool's database lacks and
// returns the versions it applied (none when the schema is current, or
// when a newer gaffer migrated it further with expands only: this one
// works on it as it is). It is what `gaffer migrate up` runs; several
// processes may call it at once (an advisory lock serialises them). It
// fails, applying nothing, on a schema ahead of this gaffer by a
// migration that is not declared compatible with it. A node refuses to
// start on a schema it cannot work with (behind it, or ahead by such a
// migration), naming the command to run.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]int, error) {
	return store.New(pool).MigrateUp(ctx)
}
