package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"text/tabwriter"
	"time"
)

// runWebhookSecrets manages a tenant's webhook signing secrets.
func (m *Main) runWebhookSecrets(ctx context.Context, args []string) error {
	return m.runGroup(ctx, "webhook-secrets", []action{
		{"rotate", "create the tenant's new signing secret (printed once); the old one signs on for --grace", (*Main).webhookSecretsRotate},
		{"list", "list the tenant's secrets that still sign", (*Main).webhookSecretsList},
		{"delete", "stop a secret signing now", (*Main).webhookSecretsDelete},
	}, args)
}

func (m *Main) webhookSecretsRotate(ctx context.Context, args []string) error {
	fs := m.newFlagSet("webhook-secrets rotate", "webhook-secrets rotate [--grace 24h] [--tenant T] [flags]\n\nCreates the tenant's new signing secret and prints it once: configure it in\nyour receivers. Until --grace ends, deliveries carry a signature under the\nold secret too, so receivers can switch without missing one.")
	cf := addClientFlags(fs)
	grace := fs.Duration("grace", "-", 24*time.Hour, "how long the previous secret keeps signing")
	tenant := fs.String("tenant", "-", "", "the tenant (tokens spanning tenants; default \"default\")")
	c, err := cf.start(fs, args, 0, "no positional arguments")
	if err != nil {
		return err
	}
	if *grace <= 0 {
		return usageError(fmt.Sprintf("--grace must be positive, got %s", *grace))
	}
	body := map[string]any{"grace": grace.String()}
	if *tenant != "" {
		body["tenant"] = *tenant
	}
	type newSecret struct {
		ID     string `json:"id"`
		Tenant string `json:"tenant"`
		Secret string `json:"secret"`
	}
	return show(m, ctx, cf, c, "POST", "/v1/webhook-secrets", body, func(tw *tabwriter.Writer, s newSecret) {
		fmt.Fprintf(tw, "secret %s of tenant %s (shown once):\n%s\n", s.ID, s.Tenant, s.Secret)
	})
}

func (m *Main) webhookSecretsList(ctx context.Context, args []string) error {
	fs := m.newFlagSet("webhook-secrets list", "webhook-secrets list [--tenant T] [flags]")
	cf := addClientFlags(fs)
	tenant := fs.String("tenant", "-", "", "the tenant (tokens spanning tenants; default \"default\")")
	c, err := cf.start(fs, args, 0, "no positional arguments")
	if err != nil {
		return err
	}
	type secretRow struct {
		ID        string     `json:"id"`
		CreatedAt time.Time  `json:"created_at"`
		ExpiresAt *time.Time `json:"expires_at"`
	}
	return list(m, ctx, cf, c, "/v1/webhook-secrets"+tenantQuery(*tenant), table[secretRow]{
		header: "ID\tCREATED\tSIGNS UNTIL",
		row: func(s secretRow) []any {
			until := "current"
			if s.ExpiresAt != nil {
				until = m.fmtTime(s.ExpiresAt)
			}
			return []any{s.ID, m.fmtTime(&s.CreatedAt), until}
		},
	})
}

func (m *Main) webhookSecretsDelete(ctx context.Context, args []string) error {
	fs := m.newFlagSet("webhook-secrets delete", "webhook-secrets delete ID [--tenant T] [flags]")
	cf := addClientFlags(fs)
	tenant := fs.String("tenant", "-", "", "the tenant (tokens spanning tenants; default \"default\")")
	c, err := cf.start(fs, args, 1, "a secret id")
	if err != nil {
		return err
	}
	if err := c.do(ctx, "DELETE", "/v1/webhook-secrets/"+url.PathEscape(fs.Arg(0))+tenantQuery(*tenant), nil, nil); err != nil {
		return err
	}
	return m.output(*cf.json, json.RawMessage(`{"deleted":1}`), func(tw *tabwriter.Writer) { fmt.Fprintf(tw, "deleted secret %s\n", fs.Arg(0)) })
}

func tenantQuery(tenant string) string {
	if tenant == "" {
		return ""
	}
	return "?tenant=" + url.QueryEscape(tenant)
}
