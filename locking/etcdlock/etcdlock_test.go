package etcdlock_test

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/etcdlock"
	"github.com/groundskeeper-io/groundskeeper/locking/locktest"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// newClient connects to endpoints; the client is closed when t ends.
func newClient(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		// Reconnect quickly after the fault tests cut the connection; the
		// defaults back off for up to two minutes.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.5, Jitter: 0.2, MaxDelay: 200 * time.Millisecond},
			MinConnectTimeout: time.Second,
		})},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// newBackend returns a backend on the shared etcd server under a key prefix
// of t's own.
func newBackend(t testing.TB, c *clientv3.Client) locking.Backend {
	t.Helper()
	b, err := etcdlock.New(etcdlock.Config{KV: c, Prefix: testenv.StartEtcd(t).Prefix})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestConformance(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	c := newClient(t, etcd.Endpoints...)
	locktest.Run(t, func(t *testing.T) locking.Backend { return newBackend(t, c) })
}

func BenchmarkLock(b *testing.B) {
	etcd := testenv.StartEtcd(b)
	c := newClient(b, etcd.Endpoints...)
	locktest.RunBenchmarks(b, func(b *testing.B) locking.Backend { return newBackend(b, c) })
}
