package faultproxy

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"
)

// Direction names one or both directions of the proxied connections.
type Direction int

const (
	// ToServer is the direction from the client to the server (requests).
	ToServer Direction = 1 << iota
	// ToClient is the direction from the server to the client (replies).
	ToClient
	// Both is both directions.
	Both = ToServer | ToClient
)

func (d Direction) String() string {
	switch d {
	case ToServer:
		return "to-server"
	case ToClient:
		return "to-client"
	case Both:
		return "both"
	}
	return "none"
}

// Stats count what the proxy did since it started.
type Stats struct {
	// Accepted counts the client connections accepted, including refused
	// ones.
	Accepted int64
	// Refused counts the connections reset at once while refusing.
	Refused int64
	// Reset counts the client connections reset by Reset or when a drop
	// was lifted.
	Reset int64
	// Forwarded and Dropped count bytes, per direction.
	ForwardedToServer, ForwardedToClient int64
	DroppedToServer, DroppedToClient     int64
}

// Proxy forwards connections from a loopback port to one target. Its
// methods are safe for concurrent use.
type Proxy struct {
	ln     net.Listener
	target string
	clock  clock.Clock

	mu         sync.Mutex
	conns      map[*link]struct{}
	latency    [2]time.Duration // indexed by dirIndex
	drop       [2]bool
	refuse     bool
	blackholed bool
	open       chan struct{} // closed while no blackhole is set
	closed     bool

	stats struct {
		accepted, refused, reset atomic.Int64
		forwarded, dropped       [2]atomic.Int64
	}
	wg sync.WaitGroup
}

// dirIndex maps ToServer to 0 and ToClient to 1.
func dirIndex(d Direction) int {
	if d == ToClient {
		return 1
	}
	return 0
}

// New listens on a free loopback port and forwards every connection to
// target ("host:port").
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	open := make(chan struct{})
	close(open)
	p := &Proxy{ln: ln, target: target, clock: clock.RealClock{}, conns: map[*link]struct{}{}, open: open}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Start is New for a test: it fails the test if the proxy cannot listen and
// closes the proxy when the test ends.
func Start(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := New(target)
	if err != nil {
		tb.Fatalf("faultproxy: %v", err)
	}
	tb.Cleanup(func() { p.Close() })
	return p
}

// Addr is the proxy's address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// SetLatency delays every chunk of bytes sent in dir by d from now on; zero
// removes the delay.
func (p *Proxy) SetLatency(dir Direction, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, one := range []Direction{ToServer, ToClient} {
		if dir&one != 0 {
			p.latency[dirIndex(one)] = d
		}
	}
}

// SetBlackhole holds every connection, current and new, forwarding nothing,
// while on is true.
func (p *Proxy) SetBlackhole(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on == p.blackholed {
		return
	}
	p.blackholed = on
	if on {
		p.open = make(chan struct{})
	} else {
		close(p.open)
	}
}

// SetRefuse resets new connections as soon as they are accepted while on is
// true.
func (p *Proxy) SetRefuse(on bool) {
	p.mu.Lock()
	p.refuse = on
	p.mu.Unlock()
}

// SetDrop discards the bytes sent in dir while on is true: a one-way
// partition. Lifting it resets the connections that lost bytes.
func (p *Proxy) SetDrop(dir Direction, on bool) {
	p.mu.Lock()
	for _, one := range []Direction{ToServer, ToClient} {
		if dir&one != 0 {
			p.drop[dirIndex(one)] = on
		}
	}
	var damaged []*link
	if !on {
		for l := range p.conns {
			if l.damaged.Load() {
				damaged = append(damaged, l)
			}
		}
	}
	p.mu.Unlock()
	for _, l := range damaged {
		if l.reset() {
			p.stats.reset.Add(1)
		}
	}
}

// Reset closes every current connection with a TCP RST on both sides and
// returns how many client connections it reset.
func (p *Proxy) Reset() int {
	p.mu.Lock()
	links := make([]*link, 0, len(p.conns))
	for l := range p.conns {
		links = append(links, l)
	}
	p.mu.Unlock()
	n := 0
	for _, l := range links {
		if l.reset() {
			n++
		}
	}
	p.stats.reset.Add(int64(n))
	return n
}

// Heal lifts every fault: no latency, blackhole, refusal or drop. It resets
// the connections that lost bytes to a drop.
func (p *Proxy) Heal() {
	p.SetLatency(Both, 0)
	p.SetRefuse(false)
	p.SetBlackhole(false)
	p.SetDrop(Both, false)
}

// Stats returns the proxy's counters.
func (p *Proxy) Stats() Stats {
	return Stats{
		Accepted:          p.stats.accepted.Load(),
		Refused:           p.stats.refused.Load(),
		Reset:             p.stats.reset.Load(),
		ForwardedToServer: p.stats.forwarded[0].Load(),
		ForwardedToClient: p.stats.forwarded[1].Load(),
		DroppedToServer:   p.stats.dropped[0].Load(),
		DroppedToClient:   p.stats.dropped[1].Load(),
	}
}

// Close stops listening, resets every connection and waits for the proxy's
// goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Reset()
	p.wg.Wait()
	return err
}

// gate returns the channel that is closed while no blackhole is set.
func (p *Proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
}

func (p *Proxy) dropping(i int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.drop[i]
}

func (p *Proxy) delay(i int) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latency[i]
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			continue
		}
		p.stats.accepted.Add(1)
		p.mu.Lock()
		refuse := p.refuse
		p.mu.Unlock()
		if refuse {
			p.stats.refused.Add(1)
			resetConn(c)
			continue
		}
		l := &link{client: c, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			resetConn(c)
			return
		}
		p.conns[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.serve(l)
	}
}

// serve dials the target once no blackhole holds the connection, then
// forwards both directions until either side ends or the link is reset.
func (p *Proxy) serve(l *link) {
	defer p.wg.Done()
	defer func() {
		l.close()
		p.mu.Lock()
		delete(p.conns, l)
		p.mu.Unlock()
	}()
	select {
	case <-p.gate():
	case <-l.done:
		return
	}
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		// The server is down: the client sees its connection reset, as
		// it would see a refusal without the proxy.
		l.reset()
		return
	}
	if !l.setServer(s) {
		s.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(l, s, l.client, 0) }()
	go func() { defer wg.Done(); p.pipe(l, l.client, s, 1) }()
	wg.Wait()
}

// chunk is a piece of the stream waiting for its time to be forwarded.
type chunk struct {
	data []byte
	due  time.Time
}

// pipe copies src to dst in direction i: a reader takes chunks off src
// (discarding them while dropped) and a writer forwards each when its
// latency has passed and no blackhole holds it. Either end ending closes
// the link.
func (p *Proxy) pipe(l *link, dst, src net.Conn, i int) {
	queue := make(chan chunk, 64)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(queue)
		for {
			if !l.wait(p.gate()) {
				return
			}
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				if p.dropping(i) {
					p.stats.dropped[i].Add(int64(n))
					l.damaged.Store(true)
				} else {
					select {
					case queue <- chunk{data: buf[:n], due: p.clock.Now().Add(p.delay(i))}:
					case <-l.done:
						return
					}
				}
			}
			if err != nil {
				return
			}
		}
	}()
	defer func() {
		l.close()
		<-readerDone
	}()
	for c := range queue {
		if wait := c.due.Sub(p.clock.Now()); wait > 0 {
			select {
			case <-p.clock.After(wait):
			case <-l.done:
				return
			}
		}
		if !l.wait(p.gate()) {
			return
		}
		if _, err := dst.Write(c.data); err != nil {
			return
		}
		p.stats.forwarded[i].Add(int64(len(c.data)))
	}
}

// link is one client connection and, once dialled, its server connection.
type link struct {
	client net.Conn

	mu      sync.Mutex
	server  net.Conn
	ended   bool
	done    chan struct{} // closed when the link ends
	damaged atomic.Bool   // bytes were dropped: the stream has a gap
}

func (l *link) setServer(s net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return false
	}
	l.server = s
	return true
}

// wait blocks until gate is open; false if the link ended first.
func (l *link) wait(gate <-chan struct{}) bool {
	select {
	case <-gate:
		return true
	case <-l.done:
		return false
	}
}

// end marks the link ended and returns its connections, or false if it had
// ended already.
func (l *link) end() (client, server net.Conn, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return nil, nil, false
	}
	l.ended = true
	close(l.done)
	return l.client, l.server, true
}

// close ends the link with an orderly close of both connections.
func (l *link) close() {
	c, s, ok := l.end()
	if !ok {
		return
	}
	c.Close()
	if s != nil {
		s.Close()
	}
}

// reset ends the link with a TCP RST on both connections; false if it had
// ended already.
func (l *link) reset() bool {
	c, s, ok := l.end()
	if !ok {
		return false
	}
	resetConn(c)
	if s != nil {
		resetConn(s)
	}
	return true
}

// resetConn closes c so that the peer gets a RST rather than a FIN.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}
