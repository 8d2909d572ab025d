package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// runHealthcheck is for container health checks in images without curl:
// it GETs a URL and exits 0 on a 2xx answer.
func (m *Main) runHealthcheck(ctx context.Context, args []string) error {
	fs := m.newFlagSet("healthcheck", "healthcheck [--url http://127.0.0.1:8080/readyz]\n\nExits 0 if the URL answers 2xx within --timeout: a container health check.")
	url := fs.String("url", "-", "http://127.0.0.1:8080/readyz", "URL to check")
	timeout := fs.Duration("timeout", "-", 3*time.Second, "how long to wait")
	if err := fs.parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", *url, nil)
	if err != nil {
		return usageError("--url: " + err.Error())
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s: HTTP %d: %s", *url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	fmt.Fprint(m.Stdout, string(body))
	return nil
}
