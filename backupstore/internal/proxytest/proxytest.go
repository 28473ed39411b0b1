package proxytest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy forwards every request to one backend.
type Proxy struct {
	// URL is the proxy's base URL, e.g. "http://127.0.0.1:41234".
	URL string
	// Host is URL without the scheme.
	Host string

	requests atomic.Int64
	failed   atomic.Int64
	mu       sync.Mutex
	delay    time.Duration
	fail     func(*http.Request) bool
	handle   func(http.ResponseWriter, *http.Request) bool
	lose     func(*http.Request) bool
	between  func(*http.Request)
	lost     atomic.Int64
	srv      *http.Server
}

// Start starts a proxy to backend (e.g. "http://127.0.0.1:9000") and stops
// it when the test ends.
func Start(tb testing.TB, backend string) *Proxy {
	tb.Helper()
	u, err := url.Parse(backend)
	if err != nil {
		tb.Fatalf("proxytest: backend %q: %v", backend, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("proxytest: listen: %v", err)
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), Host: ln.Addr().String()}
	rp := &httputil.ReverseProxy{
		Transport: &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second},
		// The backend sees the original Host header: S3 signatures cover
		// it, so it must not be rewritten.
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme = u.Scheme
			r.Out.URL.Host = u.Host
			r.Out.Host = r.In.Host
		},
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.requests.Add(1)
		p.mu.Lock()
		delay, fail, handle, lose, between := p.delay, p.fail, p.handle, p.lose, p.between
		p.mu.Unlock()
		if delay > 0 {
			time.Sleep(delay)
		}
		if fail != nil && fail(r) {
			p.failed.Add(1)
			http.Error(w, "proxytest: injected failure", http.StatusServiceUnavailable)
			return
		}
		if handle != nil && handle(w, r) {
			return
		}
		if lose != nil && lose(r) {
			// The store acts on the request; its answer is dropped.
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			p.lost.Add(1)
			if between != nil {
				between(r)
			}
			http.Error(w, "proxytest: the store's answer was lost", http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	})}
	go p.srv.Serve(ln)
	tb.Cleanup(func() { p.srv.Close() })
	return p
}

// SetDelay makes every request wait d before it is forwarded.
func (p *Proxy) SetDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// SetFail makes the requests for which f returns true fail with 503
// Service Unavailable without reaching the backend. nil fails none.
func (p *Proxy) SetFail(f func(*http.Request) bool) {
	p.mu.Lock()
	p.fail = f
	p.mu.Unlock()
}

// SetHandler lets h answer requests itself, without forwarding them: a
// request is forwarded only when h returns false (and then h must not have
// written to w). nil forwards every request.
func (p *Proxy) SetHandler(h func(w http.ResponseWriter, r *http.Request) bool) {
	p.mu.Lock()
	p.handle = h
	p.mu.Unlock()
}

// SetLoseAnswer makes the requests for which lose returns true reach the
// store, which acts on them, and answers them 503 Service Unavailable in
// place of the store's answer, as when a reply is lost after the store
// applied the request. between, when not nil, is called after the store
// answered and before the client gets the 503: another writer acting in
// between. nil lose loses no answer.
func (p *Proxy) SetLoseAnswer(lose func(*http.Request) bool, between func(*http.Request)) {
	p.mu.Lock()
	p.lose, p.between = lose, between
	p.mu.Unlock()
}

// Lost returns the number of requests whose answer was lost on purpose.
func (p *Proxy) Lost() int64 { return p.lost.Load() }

// Requests returns the number of requests received so far.
func (p *Proxy) Requests() int64 { return p.requests.Load() }

// Failed returns the number of requests failed on purpose so far.
func (p *Proxy) Failed() int64 { return p.failed.Load() }

// ResetCounts sets the counters to zero.
func (p *Proxy) ResetCounts() {
	p.requests.Store(0)
	p.failed.Store(0)
}
