package etcdlock_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/etcdlock"
	"github.com/groundskeeper-io/groundskeeper/locking/locktest"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// Environment of the hammering child processes (see TestMultiProcess).
const (
	endpointsEnv = "ETCDLOCK_TEST_ENDPOINTS"
	prefixEnv    = "ETCDLOCK_TEST_PREFIX"
)

func TestMain(m *testing.M) {
	locktest.HammerChild(func(ctx context.Context) (locking.Backend, error) {
		c, err := clientv3.New(clientv3.Config{
			Endpoints:   strings.Split(os.Getenv(endpointsEnv), ","),
			DialTimeout: 5 * time.Second,
			Logger:      zap.NewNop(),
		})
		if err != nil {
			return nil, err
		}
		return etcdlock.New(etcdlock.Config{KV: c, Prefix: os.Getenv(prefixEnv)})
	})
	testenv.Main(m)
}
