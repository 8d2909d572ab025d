package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/store"
)

// Tokens are managed against the database directly: the first token
// cannot come from an API that needs one.
func (m *Main) runTokens(ctx context.Context, args []string) error {
	return m.runGroup(ctx, "tokens", []action{
		{"create", "create an API token (printed once)", (*Main).tokensCreate},
		{"list", "list tokens", (*Main).tokensList},
		{"revoke", "revoke a token by id", (*Main).tokensRevoke},
	}, args)
}

func (m *Main) tokenStore(ctx context.Context, fs *flagSet, dbURL *string) (*store.Store, error) {
	if *dbURL == "" {
		return nil, usageError("--database-url (or $DATABASE_URL) is required: tokens are managed in the database")
	}
	st, err := store.Open(ctx, *dbURL, 2)
	if err != nil {
		return nil, err
	}
	if err := st.CheckSchema(ctx); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

func (m *Main) tokensCreate(ctx context.Context, args []string) error {
	fs := m.newFlagSet("tokens create", "tokens create --name NAME --scopes jobs:read,jobs:write [--tenant T] [flags]\n\nScopes: jobs:read, jobs:write, cluster:read (nodes and cluster state), worker (remote\nworkers: claim and finish jobs over HTTP), admin (implies the others). --tenant \"*\" (admin only)\nspans tenants: an operator's token. A tenant's admin or cluster:read token is confined to its\ntenant (its own limits and remote workers; no weights, queue pauses or node drains).\nThe token is printed once; only its hash is stored.")
	dbURL := fs.String("database-url", "DATABASE_URL", "", "PostgreSQL connection URL")
	name := fs.String("name", "-", "", "what the token is for")
	tenant := fs.String("tenant", "-", "default", "tenant the token acts for, or * (admin)")
	scopes := fs.String("scopes", "-", "", "comma-separated: jobs:read, jobs:write, cluster:read, worker, admin")
	asJSON := fs.Bool("json", "-", false, "print the token and its record as JSON")
	if err := fs.parse(args); err != nil {
		return err
	}
	if err := needArgs(fs, 0, "no positional arguments"); err != nil {
		return err
	}
	st, err := m.tokenStore(ctx, fs, dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	var sc []string
	for _, s := range strings.Split(*scopes, ",") {
		if s = strings.TrimSpace(s); s != "" {
			sc = append(sc, s)
		}
	}
	text, rec, err := auth.NewTokens(st.Pool()).Create(ctx, auth.NewTokenRequest{Name: *name, Tenant: *tenant, Scopes: sc})
	if err != nil {
		return usageError(err.Error())
	}
	fmt.Fprintf(m.Stderr, "created %s (%s) for tenant %s with %s; keep it, it is not shown again:\n", rec.ID, rec.Name, rec.Tenant, strings.Join(rec.Scopes, ","))
	if *asJSON {
		b, err := job.EncodeJSON(struct {
			tokenRow
			Token string `json:"token"`
		}{tokenRow{ID: rec.ID, Name: rec.Name, Tenant: rec.Tenant, Scopes: rec.Scopes, CreatedAt: rec.CreatedAt}, text})
		if err != nil {
			return err
		}
		return m.output(true, b, nil)
	}
	fmt.Fprintln(m.Stdout, text)
	return nil
}

func (m *Main) tokensList(ctx context.Context, args []string) error {
	fs := m.newFlagSet("tokens list", "tokens list [flags]")
	dbURL := fs.String("database-url", "DATABASE_URL", "", "PostgreSQL connection URL")
	asJSON := fs.Bool("json", "-", false, "print JSON instead of a table")
	if err := fs.parse(args); err != nil {
		return err
	}
	if err := needArgs(fs, 0, "no positional arguments"); err != nil {
		return err
	}
	st, err := m.tokenStore(ctx, fs, dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	toks, err := auth.NewTokens(st.Pool()).List(ctx)
	if err != nil {
		return err
	}
	rows := make([]tokenRow, len(toks))
	for i, t := range toks {
		rows[i] = tokenRow{ID: t.ID, Name: t.Name, Tenant: t.Tenant, Scopes: t.Scopes, CreatedAt: t.CreatedAt, RevokedAt: t.RevokedAt}
	}
	return printRows(m, *asJSON, rows, table[tokenRow]{
		header: "ID\tNAME\tTENANT\tSCOPES\tCREATED\tREVOKED",
		row: func(t tokenRow) []any {
			return []any{t.ID, t.Name, t.Tenant, strings.Join(t.Scopes, ","), m.fmtTime(&t.CreatedAt), m.fmtTime(t.RevokedAt)}
		},
	})
}

// tokenRow is a token as tokens list shows it: never its hash.
type tokenRow struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Tenant    string     `json:"tenant"`
	Scopes    []string   `json:"scopes"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at"`
}

func (m *Main) tokensRevoke(ctx context.Context, args []string) error {
	fs := m.newFlagSet("tokens revoke", "tokens revoke ID [flags]")
	dbURL := fs.String("database-url", "DATABASE_URL", "", "PostgreSQL connection URL")
	asJSON := fs.Bool("json", "-", false, "print the revoked token's id as JSON")
	if err := fs.parse(args); err != nil {
		return err
	}
	if err := needArgs(fs, 1, "a token id (see tokens list)"); err != nil {
		return err
	}
	st, err := m.tokenStore(ctx, fs, dbURL)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := auth.NewTokens(st.Pool()).Revoke(ctx, fs.Arg(0)); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("no token %q", fs.Arg(0))
		}
		return err
	}
	b, err := job.EncodeJSON(map[string]string{"revoked": fs.Arg(0)})
	if err != nil {
		return err
	}
	return m.output(*asJSON, b, func(tw *tabwriter.Writer) {
		fmt.Fprintf(tw, "revoked %s (effective on every node within 5s)\n", fs.Arg(0))
	})
}
