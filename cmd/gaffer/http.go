package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/gafferhq/gaffer/auth"
	"github.com/hashicorp/go-hclog"
)

// maxHeaderBytes caps a request's header block (Go's default is 1 MiB).
// 64 KiB holds any real browser's or client's headers many times over.
const maxHeaderBytes = 64 << 10

// readHeaderTimeout bounds how long a client may take to send its
// request headers; --http-read-timeout bounds the whole request.
const readHeaderTimeout = 10 * time.Second

// httpFlags are the node flags that shape its HTTP server.
type httpFlags struct {
	readTimeout     *time.Duration
	writeTimeout    *time.Duration
	idleTimeout     *time.Duration
	shutdownTimeout *time.Duration
	trustedProxies  *string
	dashSession     *time.Duration
}

func addHTTPFlags(fs *flagSet) *httpFlags {
	return &httpFlags{
		readTimeout: fs.Duration("http-read-timeout", "", 30*time.Second,
			"how long a client may take to send a whole request, headers and body; a slower one (slowloris) is cut off"),
		writeTimeout: fs.Duration("http-write-timeout", "", 60*time.Second,
			"how long a request may take from the end of its headers to the end of the response"),
		idleTimeout: fs.Duration("http-idle-timeout", "", 120*time.Second,
			"how long an idle keep-alive connection is kept open"),
		shutdownTimeout: fs.Duration("shutdown-timeout", "", 10*time.Second,
			"on SIGTERM, how long requests in flight get to finish before the node drains (new connections are refused at once)"),
		trustedProxies: fs.String("trusted-proxies", "", "",
			"reverse proxies whose X-Forwarded-For and X-Forwarded-Proto are believed: CIDRs or addresses, comma-separated"),
		dashSession: fs.Duration("dashboard-session-length", "", 12*time.Hour,
			"how long a dashboard sign-in lasts (absolute, from sign-in)"),
	}
}

// httpSettings are the HTTP flags, checked.
type httpSettings struct {
	read, write, idle, shutdown time.Duration
	proxies                     *auth.TrustedProxies
	sessionLength               time.Duration
}

func (f *httpFlags) httpSettings() (httpSettings, error) {
	for name, d := range map[string]time.Duration{"http-read-timeout": *f.readTimeout, "http-write-timeout": *f.writeTimeout,
		"http-idle-timeout": *f.idleTimeout, "shutdown-timeout": *f.shutdownTimeout, "dashboard-session-length": *f.dashSession} {
		if d <= 0 {
			return httpSettings{}, usageError(fmt.Sprintf("--%s must be positive, got %s", name, d))
		}
	}
	proxies, err := auth.ParseTrustedProxies(*f.trustedProxies)
	if err != nil {
		return httpSettings{}, usageError("--trusted-proxies: " + err.Error())
	}
	return httpSettings{read: *f.readTimeout, write: *f.writeTimeout, idle: *f.idleTimeout, shutdown: *f.shutdownTimeout,
		proxies: proxies, sessionLength: *f.dashSession}, nil
}

// newHTTPServer is the node's HTTP server: every phase of a connection is
// bounded, so that slow or idle clients cannot hold connections (and
// their goroutines and buffers) open at will.
func newHTTPServer(h http.Handler, hs httpSettings) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: min(readHeaderTimeout, hs.read),
		ReadTimeout:       hs.read,
		WriteTimeout:      hs.write,
		IdleTimeout:       hs.idle,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// listen opens the HTTP listener. It is opened before the node starts:
// the outbound guard must know the API's real address (--addr :0 picks a
// port) to refuse http jobs aimed at it.
func listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// serveHTTP serves h on ln in the background (TLS with --tls-cert). A
// failure to serve after listening ends the process.
func serveHTTP(ln net.Listener, h http.Handler, nf *nodeFlags, log hclog.Logger) (*http.Server, error) {
	hs, err := nf.httpSettings()
	if err != nil {
		return nil, err
	}
	srv := newHTTPServer(h, hs)
	tls := *nf.tlsCert != ""
	go func() {
		var err error
		if tls {
			err = srv.ServeTLS(ln, *nf.tlsCert, *nf.tlsKey)
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server", "error", err)
			os.Exit(1)
		}
	}()
	log.Info("listening", "addr", ln.Addr().String(), "tls", tls)
	return srv, nil
}

// shutdownHTTP stops srv gracefully: it closes the listener at once, lets
// requests in flight finish for up to timeout, then closes what is left.
func shutdownHTTP(srv *http.Server, timeout time.Duration, log hclog.Logger) {
	log.Info("stopping the HTTP server; requests in flight may finish", "timeout", timeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("requests still in flight at the shutdown timeout were cut off", "error", err)
		srv.Close()
	}
}
