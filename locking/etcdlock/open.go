package etcdlock

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/groundskeeper-io/groundskeeper/locking"
)

// DefaultDialTimeout is how long Open's client waits for a first
// connection, unless the URL's dial_timeout says otherwise.
const DefaultDialTimeout = 5 * time.Second

// Open is the locking.Opener of etcd:// URLs:
//
//	etcd://HOST:PORT[,HOST:PORT...]/PREFIX[?dial_timeout=5s]
//
// It makes a client of the endpoints (plain http: for TLS or
// authentication, make the clientv3.Client yourself and call New), and
// keeps the lock's keys under the URL's path, slashes included
// (etcd://h:2379/fdb-lock/ stores them under "/fdb-lock/"; no path means no
// prefix). The Closer closes the client.
func Open(_ context.Context, u *url.URL) (locking.Backend, io.Closer, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: etcd lock URL %q: %s", locking.ErrInvalidConfig, u.Redacted(), fmt.Sprintf(format, args...))
	}
	if u.User != nil {
		return nil, nil, bad("credentials in the URL are not supported: make the client yourself and call etcdlock.New")
	}
	if u.Host == "" {
		return nil, nil, bad("no endpoints: want etcd://host:port[,host:port...]/prefix")
	}
	var endpoints []string
	for _, h := range strings.Split(u.Host, ",") {
		if h == "" || !strings.Contains(h, ":") {
			return nil, nil, bad("endpoint %q: want host:port", h)
		}
		endpoints = append(endpoints, "http://"+h)
	}
	q := u.Query()
	dial := DefaultDialTimeout
	for k, v := range q {
		if k != "dial_timeout" {
			return nil, nil, bad("unknown parameter %q: the only one is dial_timeout", k)
		}
		d, err := time.ParseDuration(v[0])
		if err != nil || d <= 0 {
			return nil, nil, bad("dial_timeout %q: want a positive duration such as 5s", v[0])
		}
		dial = d
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: dial})
	if err != nil {
		return nil, nil, fmt.Errorf("etcd client for %v: %w", endpoints, err)
	}
	b, err := New(Config{KV: c, Prefix: u.Path})
	if err != nil {
		c.Close()
		return nil, nil, err
	}
	return b, c, nil
}
