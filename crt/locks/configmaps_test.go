package locks_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/crt/locks"
	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/kubelock"
	"github.com/groundskeeper-io/groundskeeper/locking/locktest"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// kubelock over a controller-runtime client passes the locking conformance
// suite on the real API server, as it does over client-go.
func TestKubelockOverControllerRuntimeConformance(t *testing.T) {
	kube := testenv.StartKubernetes(t)
	c, err := client.New(kube.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	var seq atomic.Int64
	locktest.Run(t, func(t *testing.T) locking.Backend {
		b, err := kubelock.New(kubelock.Config{Client: locks.ConfigMaps(c, c), Namespace: kube.Namespace, Name: fmt.Sprintf("crt-lock-%d", seq.Add(1))})
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}
