package store

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Endpoints returns "host:port" for every server databaseURL may connect
// to — its host and any fallbacks, as pgx reads a URL or keyword/value
// string (PG* environment variables included) — leaving out Unix
// sockets. The outbound guard refuses them as the node's own.
func Endpoints(databaseURL string) ([]string, error) {
	cfg, err := pgconn.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", err)
	}
	var out []string
	add := func(host string, port uint16) {
		if host == "" || strings.HasPrefix(host, "/") {
			return // a Unix socket
		}
		if e := net.JoinHostPort(host, strconv.Itoa(int(port))); !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	add(cfg.Host, cfg.Port)
	for _, f := range cfg.Fallbacks {
		add(f.Host, f.Port)
	}
	return out, nil
}
