package locktest

import (
	"fmt"
	"time"

	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/testenv/faultproxy"
)

// Proxy is a TCP proxy on loopback between a client and a server, for
// cutting the connection in the middle of transactions: Cut closes every
// open connection at once; while down, new connections are closed as soon
// as they are accepted; while replies are dropped, requests still reach the
// server (and are applied) but its answers are discarded, so the client
// cannot know the outcome. TLS passes through unchanged.
//
// It is a thin wrapper over the module's fault proxy
// (testenv/faultproxy), which also adds latency, blackholes and drops
// requests; the chaos tests use that one directly.
type Proxy struct {
	p *faultproxy.Proxy
}

// NewProxy listens on a free loopback port and forwards to target
// ("host:port").
func NewProxy(target string) (*Proxy, error) {
	p, err := faultproxy.New(target)
	if err != nil {
		return nil, err
	}
	return &Proxy{p: p}, nil
}

// Addr is the proxy's address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.p.Addr() }

// Cut closes every open connection, in both directions, with a TCP reset,
// and returns how many client connections it cut.
func (p *Proxy) Cut() int { return p.p.Reset() }

// SetDown makes the proxy refuse (accept and reset at once) new
// connections while down is true.
func (p *Proxy) SetDown(down bool) { p.p.SetRefuse(down) }

// SetDropReplies makes the proxy discard what the server sends while drop
// is true. The connections are useless afterwards (the client's protocol
// stream has a gap): they are cut when the drop is lifted.
func (p *Proxy) SetDropReplies(drop bool) { p.p.SetDrop(faultproxy.ToClient, drop) }

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error { return p.p.Close() }

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
