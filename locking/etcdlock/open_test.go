package etcdlock_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/etcdlock"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// An etcd:// URL opens a backend on the real server whose keys are under
// the URL's path.
func TestOpenURL(t *testing.T) {
	e := testenv.StartEtcd(t)
	ctx := context.Background()
	var hosts []string
	for _, ep := range e.Endpoints {
		hosts = append(hosts, strings.TrimPrefix(ep, "http://"))
	}
	raw := "etcd://" + strings.Join(hosts, ",") + e.Prefix + "?dial_timeout=3s"
	b, closer, err := locking.Open(ctx, raw, map[string]locking.Opener{"etcd": etcdlock.Open})
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	l, err := locking.New(locking.Config{Backend: b, LockID: "dc1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(ctx); err != nil {
		t.Fatal(err)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: e.Endpoints})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.Get(ctx, e.Prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Count != 1 || !strings.HasPrefix(string(resp.Kvs[0].Key), e.Prefix+locking.DefaultPrefix) {
		t.Fatalf("keys under %q: %d (%v), want the lock's one key there", e.Prefix, resp.Count, resp.Kvs)
	}
}

func TestOpenURLRejects(t *testing.T) {
	for _, tc := range []struct{ url, want string }{
		{"etcd:///p/", "no endpoints"},
		{"etcd://h/p/", `endpoint "h": want host:port`},
		{"etcd://u:p@h:2379/p/", "credentials in the URL are not supported"},
		{"etcd://h:2379/p/?timeout=1s", `unknown parameter "timeout"`},
		{"etcd://h:2379/p/?dial_timeout=soon", `dial_timeout "soon"`},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = etcdlock.Open(context.Background(), u)
		if !errors.Is(err, locking.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want ErrInvalidConfig saying %q", tc.url, err, tc.want)
		}
		if strings.Contains(tc.url, "u:p@") && strings.Contains(err.Error(), "u:p@") {
			t.Errorf("error %q shows the password", err)
		}
	}
}
