package gaffer_test

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/store"
)

func gafferStore(pool *pgxpool.Pool) *store.Store { return store.New(pool) }
