package plugin_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/cmd/kubectl-groundskeeper/plugin"
	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/kubelock"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

var t0 = time.Date(2026, 1, 15, 9, 0, 0, 0, time.UTC)

// operatorLock is the lock as the operator instance id uses it, on the
// ConfigMap gk-lock of k's namespace, at the fake time clk.
func operatorLock(t *testing.T, k *testenv.Kubernetes, id string, clk *clocktesting.FakeClock) (*locking.Lock, *kubelock.Backend) {
	t.Helper()
	b, err := kubelock.New(kubelock.Config{Client: kubelock.ClientGo(k.Client.CoreV1()), Namespace: k.Namespace, Name: "gk-lock"})
	if err != nil {
		t.Fatal(err)
	}
	l, err := locking.New(locking.Config{Backend: b, LockID: id, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return l, b
}

func denyList(t *testing.T, l *locking.Lock) []string {
	t.Helper()
	ids, err := l.DenyList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestLock(t *testing.T) {
	k := testenv.StartKubernetes(t)
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	l, _ := operatorLock(t, k, "operator-a", clk)
	if _, err := l.Take(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.UpdateDenyList(ctx, []locking.DenyListEntry{{ID: "operator-b"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.AddPendingUpgrades(ctx, "7.1.26", []string{"storage-1", "storage-2"}); err != nil {
		t.Fatal(err)
	}
	opts := plugin.Options{LockName: "gk-lock", Clock: clocktesting.NewFakeClock(t0.Add(4 * time.Minute))}

	r := run(t, opts, kube(k, "lock")...)
	if r.code != 0 {
		t.Fatalf("lock: exit %d: %s", r.code, r.err)
	}
	golden(t, "lock.txt", r.out, k)
	r = run(t, opts, kube(k, "lock", "-o", "json")...)
	golden(t, "lock.json", r.out, k)
	r = run(t, opts, kube(k, "lock", "-o", "name")...)
	golden(t, "lock.name", r.out, k)

	expired := opts
	expired.Clock = clocktesting.NewFakeClock(t0.Add(12 * time.Minute))
	r = run(t, expired, kube(k, "lock")...)
	if !strings.Contains(r.out, "expired 2m ago") {
		t.Errorf("lock after the end does not say it expired 2m ago:\n%s", r.out)
	}

	t.Run("deny is a dry run without --yes", func(t *testing.T) {
		r := run(t, opts, kube(k, "lock", "deny", "operator-c")...)
		if r.code != 0 || !strings.Contains(r.out, "add operator-c to the deny list") || !strings.Contains(r.out, "dry run: nothing changed") {
			t.Errorf("exit %d, output does not print the plan and the dry run:\n%s", r.code, r.out)
		}
		if got := denyList(t, l); !slices.Equal(got, []string{"operator-b"}) {
			t.Errorf("deny list after a dry run = %v, want [operator-b]", got)
		}
	})
	t.Run("deny and allow with --yes", func(t *testing.T) {
		r := run(t, opts, kube(k, "lock", "deny", "operator-c", "--yes")...)
		if r.code != 0 || !strings.Contains(r.out, "operator-c denied") {
			t.Errorf("deny --yes: exit %d:\n%s", r.code, r.out)
		}
		r = run(t, opts, kube(k, "lock", "allow", "operator-b", "--yes")...)
		if r.code != 0 || !strings.Contains(r.out, "operator-b allowed") {
			t.Errorf("allow --yes: exit %d:\n%s", r.code, r.out)
		}
		if got := denyList(t, l); !slices.Equal(got, []string{"operator-c"}) {
			t.Errorf("deny list = %v, want [operator-c]", got)
		}
		r = run(t, opts, kube(k, "lock", "allow", "operator-b", "--yes")...)
		if r.code != 0 || !strings.Contains(r.out, "operator-b is not on the deny list: nothing to do") {
			t.Errorf("allow of an allowed instance: exit %d:\n%s", r.code, r.out)
		}
		rec, ok, err := l.Holder(ctx)
		if err != nil || !ok || rec.Holder != "operator-a" {
			t.Errorf("the lock record changed: %+v %v %v", rec, ok, err)
		}
	})
}

func TestLockWithoutRecord(t *testing.T) {
	k := testenv.StartKubernetes(t)
	r := run(t, plugin.Options{}, kube(k, "lock", "--configmap", "no-lock-yet")...)
	if r.code != 0 || !strings.Contains(r.out, "<none>") {
		t.Errorf("a lock never taken: exit %d:\n%s%s", r.code, r.out, r.err)
	}
	if _, err := k.Client.CoreV1().ConfigMaps(k.Namespace).Get(context.Background(), "no-lock-yet", metav1.GetOptions{}); err == nil {
		t.Errorf("reading the lock created its ConfigMap")
	}
}

func TestLockMalformedRecord(t *testing.T) {
	k := testenv.StartKubernetes(t)
	_, b := operatorLock(t, k, "operator-a", clocktesting.NewFakeClock(t0))
	// A record that is not tuple{lockID, start, end}: the lockID is a byte
	// string (type code 0x01), not a unicode string.
	garbage := []byte("\x01operator-a\x00\x15\x01\x15\x02")
	if err := b.Update(context.Background(), func(tx locking.Txn) error {
		return tx.Set([]byte(locking.DefaultPrefix+"/global"), garbage)
	}); err != nil {
		t.Fatal(err)
	}
	r := run(t, plugin.Options{}, kube(k, "lock", "--configmap", "gk-lock")...)
	oneLineError(t, r, plugin.ExitError, k.Namespace+"/gk-lock", "global", "lockID is []uint8, want a unicode string")
}
