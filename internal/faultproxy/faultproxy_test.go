package faultproxy

import (
	"bufio"
	"net"
	"testing"
	"time"
)

func echoServer(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						c.Close()
						return
					}
					c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn, timeout time.Duration) error {
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_, err := bufio.NewReader(c).ReadString('\n')
	return err
}

func TestModes(t *testing.T) {
	p, err := Start(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if err := roundTrip(c, time.Second); err != nil {
		t.Fatalf("pass: %v", err)
	}
	p.Set(Blackhole)
	if err := roundTrip(c, 200*time.Millisecond); err == nil {
		t.Fatal("traffic got through a blackhole")
	}
	p.Set(Pass)
	c2, _ := net.Dial("tcp", p.Addr())
	if err := roundTrip(c2, time.Second); err != nil {
		t.Fatalf("after blackhole: %v", err)
	}
	p.SetLatency(150 * time.Millisecond)
	start := time.Now()
	if err := roundTrip(c2, 2*time.Second); err != nil || time.Since(start) < 300*time.Millisecond {
		t.Fatalf("latency: %v after %s", err, time.Since(start))
	}
	p.SetLatency(0)
	p.Set(Reset)
	if err := roundTrip(c2, time.Second); err == nil {
		t.Fatal("a reset connection still works")
	}
	p.Set(Pass)
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil || roundTrip(c3, time.Second) != nil {
		t.Fatalf("after reset: %v", err)
	}
}

// TestDelayKeepsThroughput: a delay holds each chunk back without
// serialising the stream, unlike SetLatency.
func TestDelayKeepsThroughput(t *testing.T) {
	p, err := Start(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetDelay(100 * time.Millisecond)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	r := bufio.NewReader(c)
	go func() {
		for range 20 {
			c.Write([]byte("ping\n"))
			time.Sleep(5 * time.Millisecond)
		}
	}()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	for i := range 20 {
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if i == 0 && time.Since(start) < 200*time.Millisecond {
			t.Fatalf("first echo after %s, want the delay both ways (200ms)", time.Since(start))
		}
	}
	// 20 lines 5ms apart, each 200ms late: ~300ms; serialised, 4s.
	if d := time.Since(start); d > time.Second {
		t.Fatalf("20 delayed lines took %s: the delay serialised the stream", d)
	}
}
