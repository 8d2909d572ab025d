// Package faultproxy is a TCP proxy for fault injection in tests: placed
// between a node and PostgreSQL or etcd, it passes traffic, or holds it
// (a blackhole: connections stay open, nothing gets through, as on a
// partitioned network), or resets every connection, or adds latency.
package faultproxy

import (
	"io"
	"net"
	"sync"
	"time"
)

// Mode is what the proxy does to traffic.
type Mode int

// Modes.
const (
	Pass      Mode = iota
	Blackhole      // hold every byte; accept new connections and hold them too
	Reset          // close every connection now and refuse new ones
)

// Proxy forwards connections from its address to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	mode    Mode
	latency time.Duration
	delay   time.Duration
	conns   map[net.Conn]struct{}
	gate    chan struct{} // closed while traffic may flow
	closed  bool
}

// Start listens on a free loopback port and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}, gate: make(chan struct{})}
	close(p.gate)
	go p.accept()
	return p, nil
}

// Addr is the address to connect to instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Set changes the mode. Leaving Blackhole releases the held traffic.
func (p *Proxy) Set(m Mode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m == p.mode {
		return
	}
	if p.mode == Blackhole {
		close(p.gate)
	}
	if m == Blackhole {
		p.gate = make(chan struct{})
	}
	if m == Reset {
		for c := range p.conns {
			c.Close()
		}
	}
	p.mode = m
}

// SetLatency delays every chunk of traffic, in both directions, by d.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// SetDelay delays every chunk of traffic, in both directions, by d
// without slowing the stream down: bytes arrive d after they were sent,
// at the rate they were sent, as over a long link. (SetLatency instead
// holds each chunk d before reading the next, which also caps the
// throughput.) It applies to connections opened after the call.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	if p.mode == Blackhole {
		close(p.gate)
		p.mode = Pass
	}
	p.mu.Unlock()
	p.ln.Close()
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.mode == Reset || p.closed {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.mu.Unlock()
		go p.serve(c)
	}
}

func (p *Proxy) track(c net.Conn, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) serve(client net.Conn) {
	p.wait()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		client.Close()
		return
	}
	p.track(client, true)
	p.track(server, true)
	defer p.track(client, false)
	defer p.track(server, false)
	p.mu.Lock()
	delay := p.delay
	p.mu.Unlock()
	pipe := p.pipe
	if delay > 0 {
		pipe = func(dst, src net.Conn) { p.delayed(dst, src, delay) }
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); pipe(server, client) }()
	go func() { defer wg.Done(); pipe(client, server) }()
	wg.Wait()
}

// wait blocks while the proxy is a blackhole.
func (p *Proxy) wait() {
	p.mu.Lock()
	gate := p.gate
	p.mu.Unlock()
	<-gate
}

func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.wait()
			p.mu.Lock()
			lat := p.latency
			p.mu.Unlock()
			if lat > 0 {
				time.Sleep(lat)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

// delayed copies src to dst, each chunk written d after it was read.
func (p *Proxy) delayed(dst, src net.Conn, d time.Duration) {
	type chunk struct {
		due  time.Time
		data []byte
	}
	q := make(chan chunk, 4096)
	go func() {
		defer dst.Close()
		for c := range q {
			time.Sleep(time.Until(c.due))
			p.wait()
			if _, err := dst.Write(c.data); err != nil {
				src.Close()
				for range q {
				}
				return
			}
		}
	}()
	defer close(q)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{due: time.Now().Add(d), data: append([]byte(nil), buf[:n]...)}
		}
		if err != nil {
			return
		}
	}
}
