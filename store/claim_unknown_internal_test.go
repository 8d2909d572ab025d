package store

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// A failed claim is "may have committed" only when the server did not
// refuse it and something was sent: a statement error the server
// reports (a PgError, FATAL 57P01 of pg_terminate_backend included)
// aborts the claim's transaction; a connection that broke under it, or a
// decode after its rows came, may leave it committed.
func TestClaimUnknownUnlessRefused(t *testing.T) {
	refused := []error{
		&pgconn.PgError{Severity: "FATAL", Code: "57P01", Message: "terminating connection due to administrator command"},
		fmt.Errorf("prepare: %w", &pgconn.PgError{Code: "40001"}),
		&pgconn.ConnectError{},
	}
	for _, err := range refused {
		var u *ClaimUnknownError
		if errors.As(unknownUnlessRefused(err), &u) {
			t.Errorf("%v: marked as a claim that may have committed", err)
		}
	}
	unknown := []error{io.ErrUnexpectedEOF, io.EOF, fmt.Errorf("read: %w", io.ErrUnexpectedEOF), errors.New("timeout: context deadline exceeded")}
	for _, err := range unknown {
		var u *ClaimUnknownError
		if !errors.As(unknownUnlessRefused(err), &u) || !errors.Is(unknownUnlessRefused(err), err) {
			t.Errorf("%v: not marked as a claim that may have committed (or the cause lost)", err)
		}
	}
}
