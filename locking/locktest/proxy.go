package locktest

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Proxy is a TCP proxy on loopback between a client and a server, for
// cutting the connection in the middle of transactions: Cut closes every
// open connection at once; while down, new connections are closed as soon
// as they are accepted; while replies are dropped, requests still reach the
// server (and are applied) but its answers are discarded, so the client
// cannot know the outcome. TLS passes through unchanged.
type Proxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	down  bool
	drop  bool
	cuts  int
	wg    sync.WaitGroup
}

// NewProxy listens on a free loopback port and forwards to target
// ("host:port").
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every open connection, in both directions, and returns how
// many client connections it cut.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.conns {
		c.Close()
		delete(p.conns, c)
		n++
	}
	p.cuts++
	return n / 2
}

// SetDown makes the proxy refuse (accept and close at once) new
// connections while down is true.
func (p *Proxy) SetDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

// SetDropReplies makes the proxy discard what the server sends while drop
// is true. The connections are useless afterwards (the client's protocol
// stream has a gap): Cut them when done.
func (p *Proxy) SetDropReplies(drop bool) {
	p.mu.Lock()
	p.drop = drop
	p.mu.Unlock()
}

func (p *Proxy) dropping() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.drop
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
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
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c] = struct{}{}
		p.conns[s] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(s, c, false)
		go p.pipe(c, s, true)
	}
}

// pipe copies from src to dst, except replies while they are dropped; when
// either side ends, both are closed.
func (p *Proxy) pipe(dst, src net.Conn, replies bool) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !(replies && p.dropping()) {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

// InjectFaults makes p fail periodically until the returned function is
// called, which restores p and says what was done. Every period it
// alternates between two faults: cut every connection and refuse new ones
// for a third of the period; or drop the server's replies for half the
// period (requests still arrive and are applied), then cut.
func InjectFaults(p *Proxy, period time.Duration) (stop func() string) {
	quit := make(chan struct{})
	report := make(chan string)
	go func() {
		wall := clock.RealClock{}
		var refused, dropped, cut int
		for i := 0; ; i++ {
			select {
			case <-quit:
				p.SetDown(false)
				p.SetDropReplies(false)
				report <- fmt.Sprintf("%d refusals, %d reply drops, %d connections cut", refused, dropped, cut)
				return
			case <-wall.After(period / 2):
			}
			if i%2 == 0 {
				p.SetDown(true)
				cut += p.Cut()
				refused++
				<-wall.After(period / 3)
				p.SetDown(false)
				continue
			}
			p.SetDropReplies(true)
			dropped++
			<-wall.After(period / 2)
			p.SetDown(true)
			cut += p.Cut()
			p.SetDropReplies(false)
			p.SetDown(false)
		}
	}()
	return func() string {
		close(quit)
		return <-report
	}
}
