package gaffer_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gafferhq/gaffer/internal/testnode"
)

type child = testnode.Child

func startChild(t *testing.T, dbURL, id string, lease time.Duration, extraEnv ...string) *child {
	return testnode.Start(t, dbURL, id, lease, extraEnv...)
}

func auditCompletions(t *testing.T, pool *pgxpool.Pool) { testnode.AuditCompletions(t, pool) }

func scalar[T any](t *testing.T, pool *pgxpool.Pool, sql string, args ...any) T {
	t.Helper()
	return testnode.Scalar[T](t, pool, sql, args...)
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testnode.WaitUntil(t, timeout, what, cond)
}
