package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/gafferhq/gaffer/auth"
	"github.com/gafferhq/gaffer/job"
	"github.com/gafferhq/gaffer/webhook"
)

type rotateSecretBody struct {
	Tenant string  `json:"tenant"`
	Grace  *string `json:"grace"`
}

// newSecretView is a secret as created: its text, shown only here.
type newSecretView struct {
	ID        string    `json:"id"`
	Tenant    string    `json:"tenant"`
	CreatedAt time.Time `json:"created_at"`
	// Secret is "whsec_…": configure it in the receivers now.
	Secret string `json:"secret"`
}

// secretTenant is the tenant a secrets request acts for: the token's, or
// for a spanning token ?tenant= (default "default").
func secretTenant(r *http.Request, p auth.Principal) string {
	if t := p.ReadTenant(r.URL.Query().Get("tenant")); t != "" {
		return t
	}
	return job.DefaultTenant
}

func (s *Server) rotateWebhookSecret(r *http.Request, p auth.Principal, body []byte) (int, any, error) {
	var b rotateSecretBody
	if len(body) > 0 {
		if pr := decodeStrict(body, &b); pr != nil {
			return 0, nil, pr
		}
	}
	tenant, pr := writeTenant(p, b.Tenant)
	if pr != nil {
		return 0, nil, pr
	}
	grace, pr := parseDuration("grace", b.Grace)
	if pr != nil {
		return 0, nil, pr
	}
	if b.Grace != nil && grace <= 0 {
		return 0, nil, fieldProblem("grace", "grace must be a positive duration, such as \"24h\"")
	}
	sec, text, err := s.cfg.WebhookSecrets.Rotate(r.Context(), tenant, grace)
	switch {
	case errors.Is(err, webhook.ErrTooManySecrets):
		return 0, nil, problem(CodeConflict, err.Error())
	case errors.Is(err, webhook.ErrRotationRace):
		return 0, nil, problem(CodeConflict, "another rotation for this tenant ran at the same time; list the secrets and retry")
	case err != nil:
		return 0, nil, err
	}
	return http.StatusCreated, newSecretView{ID: sec.ID, Tenant: sec.Tenant, CreatedAt: sec.CreatedAt, Secret: text}, nil
}

func (s *Server) listWebhookSecrets(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	secs, err := s.cfg.WebhookSecrets.List(r.Context(), secretTenant(r, p))
	if err != nil {
		return 0, nil, err
	}
	if secs == nil {
		secs = []webhook.Secret{}
	}
	return http.StatusOK, list[webhook.Secret]{Data: secs}, nil
}

func (s *Server) deleteWebhookSecret(r *http.Request, p auth.Principal, _ []byte) (int, any, error) {
	id := r.PathValue("id")
	err := s.cfg.WebhookSecrets.Delete(r.Context(), secretTenant(r, p), id)
	if errors.Is(err, webhook.ErrSecretNotFound) {
		return 0, nil, notFoundProblem("webhook secret", id)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusNoContent, nil, nil
}
