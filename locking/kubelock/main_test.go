package kubelock_test

import (
	"context"
	"os"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/kubelock"
	"github.com/groundskeeper-io/groundskeeper/locking/locktest"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// Environment of the hammering child processes (see TestExclusionProcesses):
// the test API server's address and token (loopback, test-only), and the
// ConfigMap.
const (
	hostEnv      = "KUBELOCK_TEST_HOST"
	tokenEnv     = "KUBELOCK_TEST_TOKEN"
	namespaceEnv = "KUBELOCK_TEST_NAMESPACE"
	nameEnv      = "KUBELOCK_TEST_NAME"
)

func TestMain(m *testing.M) {
	locktest.HammerChild(func(context.Context) (locking.Backend, error) {
		client, err := kubernetes.NewForConfig(&rest.Config{
			Host:            os.Getenv(hostEnv),
			BearerToken:     os.Getenv(tokenEnv),
			TLSClientConfig: rest.TLSClientConfig{Insecure: true},
			QPS:             1000,
			Burst:           2000,
		})
		if err != nil {
			return nil, err
		}
		return kubelock.New(kubelock.Config{Client: kubelock.ClientGo(client.CoreV1()), Namespace: os.Getenv(namespaceEnv), Name: os.Getenv(nameEnv)})
	})
	testenv.Main(m)
}
