package faultproxy_test

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/testenv/faultproxy"
)

// TestMain fails the package if a proxy goroutine outlives the tests: Close
// must wait for all of them.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if stacks := leaked(); stacks != "" {
			fmt.Fprintf(os.Stderr, "faultproxy goroutines leaked:\n%s\n", stacks)
			code = 1
		}
	}
	os.Exit(code)
}

func leaked() string {
	var stacks string
	for range 50 {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		stacks = ""
		for g := range strings.SplitSeq(string(buf), "\n\n") {
			if strings.Contains(g, "testenv/faultproxy.(*") {
				stacks += g + "\n\n"
			}
		}
		if stacks == "" {
			return ""
		}
		time.Sleep(20 * time.Millisecond)
	}
	return stacks
}

// echoServer answers every line with the same line, and counts the
// connections and lines it received.
type echoServer struct {
	addr         string
	conns, lines atomic.Int64
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	e := &echoServer{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			e.conns.Add(1)
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					e.lines.Add(1)
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return e
}

// client is one connection through the proxy that sends lines and reads
// their echoes.
type client struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dial(t *testing.T, p *faultproxy.Proxy) *client {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{t: t, c: c, r: bufio.NewReader(c)}
}

func (c *client) send(line string) error {
	_, err := c.c.Write([]byte(line + "\n"))
	return err
}

// recv reads one line, waiting at most timeout.
func (c *client) recv(timeout time.Duration) (string, error) {
	c.c.SetReadDeadline(time.Now().Add(timeout))
	line, err := c.r.ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

// roundTrip sends a line, waits for its echo and says how long it took.
func (c *client) roundTrip(line string) time.Duration {
	c.t.Helper()
	start := time.Now()
	if err := c.send(line); err != nil {
		c.t.Fatalf("send %q: %v", line, err)
	}
	got, err := c.recv(10 * time.Second)
	if err != nil || got != line {
		c.t.Fatalf("echo of %q = %q, %v", line, got, err)
	}
	return time.Since(start)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func TestForwardsTLSAndHTTP(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "hello over TLS")
	}))
	defer srv.Close()
	p := faultproxy.Start(t, strings.TrimPrefix(srv.URL, "https://"))
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 10 * time.Second}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("https://" + p.Addr() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello over TLS" {
		t.Fatalf("body through the proxy = %q", body)
	}
	if s := p.Stats(); s.ForwardedToServer == 0 || s.ForwardedToClient == 0 {
		t.Fatalf("stats after a TLS request = %+v, want bytes forwarded both ways", s)
	}
}

func TestLatency(t *testing.T) {
	e := startEcho(t)
	p := faultproxy.Start(t, e.addr)
	c := dial(t, p)
	const d = 150 * time.Millisecond
	if rt := c.roundTrip("warm-up"); rt >= d {
		t.Logf("round trip without latency took %s (a loaded machine)", rt)
	}
	for _, tc := range []struct {
		name string
		dir  faultproxy.Direction
		want time.Duration
	}{
		{"requests delayed", faultproxy.ToServer, d},
		{"replies delayed", faultproxy.ToClient, d},
		{"both delayed", faultproxy.Both, 2 * d},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p.SetLatency(faultproxy.Both, 0)
			p.SetLatency(tc.dir, d)
			if rt := c.roundTrip(tc.name); rt < tc.want {
				t.Fatalf("round trip = %s, want at least %s", rt, tc.want)
			}
		})
	}

	// Chunks are delayed, not queued behind each other's delays: ten
	// lines sent at once all arrive about d*2 later, not ten times that.
	p.SetLatency(faultproxy.Both, d)
	start := time.Now()
	for i := range 10 {
		if err := c.send(fmt.Sprint("burst ", i)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // separate chunks
	}
	for i := range 10 {
		if got, err := c.recv(10 * time.Second); err != nil || got != fmt.Sprint("burst ", i) {
			t.Fatalf("burst line %d = %q, %v", i, got, err)
		}
	}
	if took := time.Since(start); took < 2*d || took > 8*d {
		t.Fatalf("ten lines with %s each way took %s, want between %s and %s", d, took, 2*d, 8*d)
	}

	p.Heal()
	if rt := c.roundTrip("healed"); rt >= 2*d {
		t.Logf("round trip after Heal took %s (a loaded machine)", rt)
	}
}

func TestBlackholeHoldsThenDelivers(t *testing.T) {
	e := startEcho(t)
	p := faultproxy.Start(t, e.addr)
	before := dial(t, p)
	before.roundTrip("before")

	p.SetBlackhole(true)
	if err := before.send("held"); err != nil {
		t.Fatal(err)
	}
	if got, err := before.recv(300 * time.Millisecond); !isTimeout(err) {
		t.Fatalf("read during blackhole = %q, %v; want a timeout", got, err)
	}
	during := dial(t, p) // accepted, but not dialled to the server
	if err := during.send("new"); err != nil {
		t.Fatal(err)
	}
	if got, err := during.recv(300 * time.Millisecond); !isTimeout(err) {
		t.Fatalf("read on a connection opened during blackhole = %q, %v; want a timeout", got, err)
	}
	if n := e.conns.Load(); n != 1 {
		t.Fatalf("server saw %d connections during blackhole, want only the one from before", n)
	}
	if n := e.lines.Load(); n != 1 {
		t.Fatalf("server received %d lines, want 1: nothing forwarded during blackhole", n)
	}

	p.SetBlackhole(false)
	for _, c := range []struct {
		c    *client
		want string
	}{{before, "held"}, {during, "new"}} {
		if got, err := c.c.recv(5 * time.Second); err != nil || got != c.want {
			t.Fatalf("after blackhole lifted: %q, %v; want %q delivered intact", got, err, c.want)
		}
	}
}

func TestResetClosesConnectionsWithRST(t *testing.T) {
	e := startEcho(t)
	p := faultproxy.Start(t, e.addr)
	a, b := dial(t, p), dial(t, p)
	a.roundTrip("a")
	b.roundTrip("b")
	if n := p.Reset(); n != 2 {
		t.Fatalf("Reset = %d, want 2 connections reset", n)
	}
	for _, c := range []*client{a, b} {
		_, err := c.recv(5 * time.Second)
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("read after Reset: %v, want ECONNRESET", err)
		}
	}
	dial(t, p).roundTrip("after reset")
	if s := p.Stats(); s.Reset != 2 {
		t.Fatalf("Stats.Reset = %d, want 2", s.Reset)
	}
}

func TestRefuseNewConnectionsKeepsCurrentOnes(t *testing.T) {
	e := startEcho(t)
	p := faultproxy.Start(t, e.addr)
	current := dial(t, p)
	current.roundTrip("before")

	p.SetRefuse(true)
	if err := dialAndRead(p); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("new connection while refusing: %v, want ECONNRESET", err)
	}
	current.roundTrip("current goes on")
	if s := p.Stats(); s.Refused != 1 {
		t.Fatalf("Stats.Refused = %d, want 1", s.Refused)
	}

	p.SetRefuse(false)
	dial(t, p).roundTrip("accepted again")
}

func TestDropRepliesAppliesRequestsLosesAnswers(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		fmt.Fprint(w, "applied")
	}))
	defer srv.Close()
	p := faultproxy.Start(t, strings.TrimPrefix(srv.URL, "http://"))
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 500 * time.Millisecond}
	get := func() error {
		resp, err := hc.Get("http://" + p.Addr() + "/")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		return err
	}
	if err := get(); err != nil {
		t.Fatal(err)
	}

	p.SetDrop(faultproxy.ToClient, true)
	if err := get(); !isTimeout(err) {
		t.Fatalf("request with replies dropped: %v, want a timeout", err)
	}
	if n := served.Load(); n != 2 {
		t.Fatalf("server handled %d requests, want 2: the one whose reply was dropped was applied", n)
	}
	if s := p.Stats(); s.DroppedToClient == 0 {
		t.Fatalf("Stats = %+v, want reply bytes dropped", s)
	}

	p.SetDrop(faultproxy.ToClient, false)
	if err := get(); err != nil {
		t.Fatalf("request after the drop was lifted: %v", err)
	}
}

func TestDropRequestsNeverReachServer(t *testing.T) {
	e := startEcho(t)
	p := faultproxy.Start(t, e.addr)
	c := dial(t, p)
	c.roundTrip("before")

	p.SetDrop(faultproxy.ToServer, true)
	if err := c.send("lost"); err != nil {
		t.Fatal(err)
	}
	if got, err := c.recv(300 * time.Millisecond); !isTimeout(err) {
		t.Fatalf("read with requests dropped = %q, %v; want a timeout", got, err)
	}
	if n := e.lines.Load(); n != 1 {
		t.Fatalf("server received %d lines, want 1", n)
	}

	p.SetDrop(faultproxy.ToServer, false)
	// The connection lost bytes: lifting the drop reset it.
	if _, err := c.recv(5 * time.Second); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read on a connection that lost bytes, after the drop was lifted: %v, want ECONNRESET", err)
	}
	dial(t, p).roundTrip("new connection")
}

func TestServerDownResetsClient(t *testing.T) {
	// Nothing listens on port 1 of loopback (and only root could).
	p := faultproxy.Start(t, "127.0.0.1:1")
	if err := dialAndRead(p); !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("connection through a proxy whose server is down: %v, want ECONNRESET", err)
	}
}

// dialAndRead opens a connection through p, sends a line and reads one
// byte. On loopback a reset may come before the dial returns.
func dialAndRead(p *faultproxy.Proxy) error {
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("hello\n")); err != nil {
		return err
	}
	_, err = c.Read(make([]byte, 1))
	return err
}

func TestCloseEndsEverything(t *testing.T) {
	e := startEcho(t)
	p, err := faultproxy.New(e.addr)
	if err != nil {
		t.Fatal(err)
	}
	held := dial(t, p)
	held.roundTrip("x")
	p.SetBlackhole(true)
	_ = held.send("held")
	_ = dial(t, p) // waiting for the blackhole to lift
	p.SetLatency(faultproxy.Both, time.Hour)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("dial after Close succeeded")
	}
	if stacks := leaked(); stacks != "" {
		t.Fatalf("goroutines after Close:\n%s", stacks)
	}
}
