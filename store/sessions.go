package store

import (
	"context"
	"fmt"
	"time"
)

var (
	sqlInsertUISession         = query("insert_ui_session")
	sqlUISession               = query("ui_session")
	sqlDeleteUISession         = query("delete_ui_session")
	sqlDeleteExpiredUISessions = query("delete_expired_ui_sessions")
)

// UISession is a dashboard session's record: who signed in, found by the
// sha256 of the session id (the id itself is never stored).
type UISession struct {
	IDHash    []byte
	TokenID   string
	Tenant    string
	Scopes    []string
	ExpiresAt time.Time
}

// InsertUISession stores a session that expires length after the
// database's now().
func (s *Store) InsertUISession(ctx context.Context, sess UISession, length time.Duration) error {
	if _, err := s.pool.Exec(ctx, sqlInsertUISession, sess.IDHash, sess.TokenID, sess.Tenant, sess.Scopes, length.Milliseconds()); err != nil {
		return fmt.Errorf("create dashboard session: %w", err)
	}
	return nil
}

// UISessionByHash finds a live session: not expired, its token not
// revoked. Errors: ErrNotFound.
func (s *Store) UISessionByHash(ctx context.Context, idHash []byte) (UISession, error) {
	sess := UISession{IDHash: idHash}
	err := s.pool.QueryRow(ctx, sqlUISession, idHash).Scan(&sess.TokenID, &sess.Tenant, &sess.Scopes, &sess.ExpiresAt)
	if err != nil {
		return sess, notFound(err)
	}
	return sess, nil
}

// DeleteUISession ends a session; ending one that does not exist is not
// an error.
func (s *Store) DeleteUISession(ctx context.Context, idHash []byte) error {
	if _, err := s.pool.Exec(ctx, sqlDeleteUISession, idHash); err != nil {
		return fmt.Errorf("end dashboard session: %w", err)
	}
	return nil
}

// DeleteExpiredUISessions deletes up to limit expired sessions. q is the
// caller's (fenced) transaction, or nil for the pool.
func (s *Store) DeleteExpiredUISessions(ctx context.Context, q DB, limit int) (int64, error) {
	tag, err := s.db(q).Exec(ctx, sqlDeleteExpiredUISessions, limit)
	if err != nil {
		return 0, fmt.Errorf("delete expired dashboard sessions: %w", err)
	}
	return tag.RowsAffected(), nil
}
