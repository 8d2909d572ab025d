package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/gafferhq/gaffer/auth"
)

// devProxy serves gaffer dev's own address (--addr) from its nodes: the
// API, the dashboard and the remote-worker endpoint go to the first node
// that runs and answers; /readyz is ready while one node is; /metrics
// gathers every running node's series (each labelled with its node).
//
// A node that was killed refuses connections (its port closes with it):
// the request goes on to the next node. A paused node (SIGSTOP) still
// accepts connections, so nodes are probed: one that does not answer is
// passed over while another does.
type devProxy struct {
	cl           *devCluster
	metricsToken string
	proxies      *auth.TrustedProxies // --trusted-proxies
	transport    *http.Transport
	probe        *http.Client
}

func newDevProxy(cl *devCluster, metricsToken string, proxies *auth.TrustedProxies) *devProxy {
	return &devProxy{
		cl:           cl,
		metricsToken: metricsToken,
		proxies:      proxies,
		// A connection per request: a node's closed or killed listener is
		// then a refused dial, never a kept-alive connection gone stale.
		transport: &http.Transport{DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext, DisableKeepAlives: true},
		probe:     &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}
}

// handler serves dev's address.
func (p *devProxy) handler(metricsToken string) (http.Handler, error) {
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", "dev-node" // RoundTrip picks the node
			r.Out.Host = r.In.Host
			// dev reads the client's address and scheme as a node would
			// (X-Forwarded-* believed from --trusted-proxies alone) and
			// tells the nodes, which trust dev (loopback) and no one else.
			if a := p.proxies.ClientAddr(r.In); a.IsValid() {
				r.Out.Header.Set("X-Forwarded-For", a.String())
			}
			proto := "http"
			if p.proxies.HTTPS(r.In) {
				proto = "https"
			}
			r.Out.Header.Set("X-Forwarded-Proto", proto)
			r.Out.Header.Set("X-Forwarded-Host", r.In.Host)
		},
		Transport:     p,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client left
			}
			http.Error(w, "no dev node answered: "+err.Error(), http.StatusServiceUnavailable)
		},
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", bearerOnly(metricsToken, promhttp.HandlerFor(p, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", p.readyz)
	mux.Handle("/", rp)
	return mux, nil
}

// watch probes every running node's /healthz four times a second until
// ctx ends, so that requests pass over a node that does not answer.
func (p *devProxy) watch(ctx context.Context) {
	var wg sync.WaitGroup
	for _, n := range p.cl.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-ctx.Done():
					return
				case <-n.done:
					n.answers.Store(false)
					return
				case <-time.After(250 * time.Millisecond):
				}
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				req, _ := http.NewRequestWithContext(pctx, "GET", "http://"+n.addr+"/healthz", nil)
				resp, err := p.probe.Do(req)
				cancel()
				if err == nil {
					resp.Body.Close()
				}
				n.answers.Store(err == nil && resp.StatusCode == http.StatusOK)
			}
		}()
	}
	wg.Wait()
}

// pick is the node a request goes to: the first running one that
// answers and was not tried yet; failing that, the first running one not
// tried yet (a probe may lag); nil when none is left.
func (p *devProxy) pick(tried map[*devNode]bool) *devNode {
	var fallback *devNode
	for _, n := range p.cl.nodes {
		if tried[n] || n.ended() {
			continue
		}
		if n.answers.Load() {
			return n
		}
		if fallback == nil {
			fallback = n
		}
	}
	return fallback
}

// RoundTrip sends req to a node, and on to the next one when a node
// refuses the connection (nothing was sent), or answers that it has
// stopped (it did nothing with the request) once the whole body, if any,
// was sent and kept (up to 1 MiB); a read (GET, HEAD) goes on to the next
// node too when its node fails in any way, or stops answering probes
// (paused) before it answers.
func (p *devProxy) RoundTrip(req *http.Request) (*http.Response, error) {
	var body *sentBody
	if req.Body != nil && req.Body != http.NoBody {
		body = newSentBody(req.Body, req.ContentLength)
	}
	read := body == nil && (req.Method == http.MethodGet || req.Method == http.MethodHead)
	tried := map[*devNode]bool{}
	err := errors.New("every dev node has stopped")
	for {
		n := p.pick(tried)
		if n == nil {
			return nil, err
		}
		tried[n] = true
		ctx, cancel := context.WithCancelCause(req.Context())
		out := req.Clone(ctx)
		out.URL.Host = n.addr
		if body != nil {
			out.Body = body
		}
		if read {
			go passOver(ctx, cancel, n)
		}
		var resp *http.Response
		resp, err = p.transport.RoundTrip(out)
		var op *net.OpError
		switch {
		case req.Context().Err() != nil:
			cancel(nil)
			return resp, err
		case err != nil && (read || (body == nil || !body.touched.Load()) && errors.As(err, &op) && op.Op == "dial"):
			cancel(nil)
			n.answers.Store(false)
			err = fmt.Errorf("node %s: %w", n.name, err)
		case err == nil && resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(nodeStoppedHeader) != "" && (body == nil || body.whole()):
			resp.Body.Close()
			cancel(nil)
			if body != nil {
				body = body.again()
			}
			err = fmt.Errorf("node %s has stopped", n.name)
		case err != nil:
			cancel(nil)
			return nil, err
		default:
			// The response's body still reads through ctx: cancelled once
			// it is closed.
			resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
			return resp, nil
		}
	}
}

// errPassedOver ends a read sent to a node that stopped answering probes.
var errPassedOver = errors.New("the node stopped answering (paused?)")

// passOver ends a read's try at n once n stops answering probes while
// the try waits for its response.
func passOver(ctx context.Context, cancel context.CancelCauseFunc, n *devNode) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
			if !n.answers.Load() {
				cancel(errPassedOver)
				return
			}
		}
	}
}

// cancelOnClose cancels a try's context once its response body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel(nil)
	return err
}

// maxReplayBody is the largest request body dev keeps to send again to
// another node (API requests are far smaller).
const maxReplayBody = 1 << 20

// sentBody is a request body on its way to a node. It says whether any
// of it was read, keeps what was read (up to maxReplayBody) so that it
// can be sent again once whole, and stays open for another try when a
// transport closes it.
type sentBody struct {
	r       io.Reader
	touched atomic.Bool
	// kept and over are written by the transport's reads; they are read
	// only once ended is closed, when the reads are over.
	kept  []byte
	over  bool
	ended chan struct{} // closed at EOF
}

func newSentBody(r io.Reader, size int64) *sentBody {
	return &sentBody{r: r, over: size > maxReplayBody, ended: make(chan struct{})}
}

func (b *sentBody) Read(p []byte) (int, error) {
	b.touched.Store(true)
	n, err := b.r.Read(p)
	// Nothing written once the reads are over: a transport that drains a
	// body the node answered early reads again after EOF (n = 0), while
	// again() reads kept.
	if n > 0 && !b.over {
		if len(b.kept)+n > maxReplayBody {
			b.over, b.kept = true, nil
		} else {
			b.kept = append(b.kept, p[:n]...)
		}
	}
	if err == io.EOF { // the transport reads to EOF, and no further
		select {
		case <-b.ended:
		default:
			close(b.ended)
		}
	}
	return n, err
}

func (b *sentBody) Close() error { return nil }

// whole says whether the body was read to its end and kept. A node that
// answers that it has stopped reads the body first: its last bytes are
// out, and the transport's read of EOF follows at once.
func (b *sentBody) whole() bool {
	select {
	case <-b.ended:
	case <-time.After(time.Second):
		return false
	}
	return !b.over
}

// again is the body to send to the next node: what was kept.
func (b *sentBody) again() *sentBody {
	return newSentBody(bytes.NewReader(b.kept), int64(len(b.kept)))
}

// readyz is ready while one node is: a node's problems, and the nodes
// that do not answer (paused), are listed as degraded. Nodes that ended
// are gone, not unready.
func (p *devProxy) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	type answer struct {
		ready bool
		lines []string
	}
	answers := make([]answer, len(p.cl.nodes))
	var wg sync.WaitGroup
	for i, n := range p.cl.nodes {
		if n.ended() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+n.addr+"/readyz", nil)
			resp, err := p.probe.Do(req)
			if err != nil {
				answers[i].lines = []string{fmt.Sprintf("node %s does not answer (paused?)", n.name)}
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			text := strings.TrimSpace(string(b))
			answers[i].ready = resp.StatusCode == http.StatusOK
			if rest, ok := strings.CutPrefix(text, "ready, degraded:"); ok {
				text = rest
			} else if text == "ready" {
				text = ""
			}
			for _, l := range strings.Split(text, "\n") {
				if l = strings.TrimSpace(l); l != "" {
					answers[i].lines = append(answers[i].lines, l)
				}
			}
		}()
	}
	wg.Wait()
	ready := false
	var lines []string
	for _, a := range answers {
		ready = ready || a.ready
		lines = append(lines, a.lines...)
	}
	switch {
	case !ready && len(lines) == 0:
		http.Error(w, "every dev node has stopped", http.StatusServiceUnavailable)
	case !ready:
		http.Error(w, strings.Join(lines, "\n"), http.StatusServiceUnavailable)
	case len(lines) > 0:
		fmt.Fprintln(w, "ready, degraded:\n"+strings.Join(lines, "\n"))
	default:
		fmt.Fprintln(w, "ready")
	}
}

// Gather gathers every running node's metrics (each series labelled
// with its node) and gaffer_dev_node_up: 1 for each node that answered.
// A node that does not answer within 2s (paused) is left out.
func (p *devProxy) Gather() ([]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	got := make([][]*dto.MetricFamily, len(p.cl.nodes))
	errs := make([]error, len(p.cl.nodes))
	var wg sync.WaitGroup
	for i, n := range p.cl.nodes {
		if n.ended() {
			errs[i] = errors.New("ended")
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], errs[i] = p.scrape(ctx, n)
		}()
	}
	wg.Wait()
	own := prometheus.NewRegistry()
	up := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gaffer_dev_node_up", Help: "1 if the dev node's process runs and answered this scrape, 0 if it ended or did not answer (paused)."}, []string{"node"})
	own.MustRegister(up)
	gatherers := prometheus.Gatherers{own}
	for i, n := range p.cl.nodes {
		if errs[i] != nil {
			up.WithLabelValues(n.name).Set(0)
			continue
		}
		up.WithLabelValues(n.name).Set(1)
		families := got[i]
		gatherers = append(gatherers, prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return families, nil }))
	}
	return gatherers.Gather()
}

// scrape reads one node's /metrics.
func (p *devProxy) scrape(ctx context.Context, n *devNode) ([]*dto.MetricFamily, error) {
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+n.addr+"/metrics", nil)
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeProtoDelim)))
	if p.metricsToken != "" {
		req.Header.Set("Authorization", "Bearer "+p.metricsToken)
	}
	resp, err := p.probe.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("node %s /metrics: %s", n.name, resp.Status)
	}
	dec := expfmt.NewDecoder(resp.Body, expfmt.ResponseFormat(resp.Header))
	var out []*dto.MetricFamily
	for {
		mf := &dto.MetricFamily{}
		if err := dec.Decode(mf); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("node %s /metrics: %w", n.name, err)
		}
		out = append(out, mf)
	}
}
