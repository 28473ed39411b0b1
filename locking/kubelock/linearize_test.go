package kubelock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/kubelock"
	"github.com/groundskeeper-io/groundskeeper/locking/locktest"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// The mutual-exclusion proof against a real kube-apiserver: contenders
// hammer take/extend/release on one ConfigMap and the recorded history is
// checked by porcupine. Each run lasts locktest.HammerDuration: 5 s under
// `go test` (and so `make test`), 20 s in the Benchmark*Exclusion*
// functions that `make bench` runs, or whatever LOCKTEST_HAMMER_DURATION
// says.

const checkTimeout = 2 * time.Minute

func hammerDuration(t testing.TB, def time.Duration) time.Duration {
	t.Helper()
	d, err := locktest.HammerDuration(def)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// goroutines hammers with 8 contenders in this process.
func goroutines(t testing.TB, d time.Duration) {
	kube := testenv.StartKubernetes(t)
	b := newBackend(t, kube.Client.CoreV1(), kube.Namespace)
	h, err := locktest.Hammer(t.Context(), b, locktest.HammerOptions{Prefix: "lin", Duration: d})
	if err != nil {
		t.Fatal(err)
	}
	locktest.CheckLinearizable(t, h, checkTimeout)
}

// processes hammers with 8 processes of one contender each.
func processes(t testing.TB, d time.Duration) {
	kube := testenv.StartKubernetes(t)
	env := []string{
		hostEnv + "=" + kube.Config.Host,
		tokenEnv + "=" + kube.Config.BearerToken,
		namespaceEnv + "=" + kube.Namespace,
		nameEnv + "=" + fmt.Sprintf("lock-%d", seq.Add(1)),
	}
	h, err := locktest.HammerProcesses(t.Context(), 8, env, t.TempDir(),
		locktest.HammerOptions{Prefix: "lin", Duration: d, Contenders: 1})
	if err != nil {
		t.Fatal(err)
	}
	clients := map[int]bool{}
	for _, op := range h.Ops {
		clients[op.Client] = true
	}
	if len(clients) != 8 {
		t.Fatalf("history has operations from %d contenders, want 8", len(clients))
	}
	locktest.CheckLinearizable(t, h, checkTimeout)
}

func TestExclusionGoroutines(t *testing.T) { goroutines(t, hammerDuration(t, 5*time.Second)) }

func TestExclusionProcesses(t *testing.T) { processes(t, hammerDuration(t, 5*time.Second)) }

// TestExclusionCatchesBrokenBackend shows that the check above would fail
// if kubelock lost its isolation: the same hammer on the same API server,
// through a wrapper that commits writes blindly after the reads, gives a
// history the checker rejects.
func TestExclusionCatchesBrokenBackend(t *testing.T) {
	kube := testenv.StartKubernetes(t)
	b := newBackend(t, kube.Client.CoreV1(), kube.Namespace)
	locktest.CheckCatchesBroken(t.Context(), t, b, locktest.HammerOptions{Prefix: "lin", Duration: 3 * time.Second}, checkTimeout)
}

// BenchmarkExclusionGoroutines20s and BenchmarkExclusionProcesses20s are the
// issue's 20-second runs; they check rather than measure, and run once.
func BenchmarkExclusionGoroutines20s(b *testing.B) {
	for range b.N {
		goroutines(b, hammerDuration(b, 20*time.Second))
	}
}

func BenchmarkExclusionProcesses20s(b *testing.B) {
	for range b.N {
		processes(b, hammerDuration(b, 20*time.Second))
	}
}

// viaProxy returns the test's control plane, a proxy in front of its API
// server, and a client that goes through the proxy.
func viaProxy(t *testing.T) (*testenv.Kubernetes, *locktest.Proxy, kubernetes.Interface) {
	t.Helper()
	kube := testenv.StartKubernetes(t)
	proxy, err := locktest.NewProxy(strings.TrimPrefix(kube.Config.Host, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	config := rest.CopyConfig(kube.Config)
	config.Host = "https://" + proxy.Addr()
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	return kube, proxy, client
}

// TestConnectionCut runs the hammer through a TCP proxy that, every 150 ms
// (a slower pace than etcd's test: client-go reconnects with a TLS
// handshake), either cuts every connection to the API server and refuses new
// ones for a moment, or lets requests through but drops the server's
// replies (so writes are applied and their callers cannot know) before
// cutting. Operations caught in a fault must fail with an error
// (unavailable, or unknown outcome for a write), and the history, with
// unknown outcomes left open, must still be linearizable: no two holders,
// and no operation reported as done that was not.
func TestConnectionCut(t *testing.T) {
	kube, proxy, client := viaProxy(t)
	b := newBackend(t, client.CoreV1(), kube.Namespace)
	done := locktest.InjectFaults(proxy, 300*time.Millisecond)
	h, err := locktest.Hammer(t.Context(), b, locktest.HammerOptions{
		Prefix: "cut", Duration: hammerDuration(t, 5*time.Second), OpTimeout: time.Second,
	})
	t.Logf("faults: %s", done())
	if err != nil {
		t.Fatal(err)
	}
	// Writes caught by a fault (unknown outcomes) are likely but, at this
	// pace, not certain in every run; TestLostReplyReportsUnknownResult
	// covers them deterministically.
	if h.Count("", "unknown")+h.Count("", "unavailable") == 0 {
		t.Fatalf("no operation was caught by a fault (%s)", h.Summary())
	}
	locktest.CheckLinearizable(t, h, checkTimeout)
}

// TestLostReplyReportsUnknownResult lets a Take's update reach the API
// server and drops the reply: the Take must fail with ErrUnknownResult,
// although the lock was taken, which Holder then shows.
func TestLostReplyReportsUnknownResult(t *testing.T) {
	kube, proxy, client := viaProxy(t)
	name := fmt.Sprintf("lock-%d", seq.Add(1))
	through, err := kubelock.New(kubelock.Config{Client: kubelock.ClientGo(client.CoreV1()), Namespace: kube.Namespace, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	dropReplies := beforeCommit{Backend: through, do: func() { proxy.SetDropReplies(true) }}
	dc1, err := locking.New(locking.Config{Backend: dropReplies, LockID: "dc1", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	_, err = dc1.Take(ctx)
	if !errors.Is(err, locking.ErrUnknownResult) || !errors.Is(err, locking.ErrUnavailable) {
		t.Fatalf("Take whose reply was lost = %v, want ErrUnknownResult and ErrUnavailable", err)
	}
	t.Logf("Take: %v", err)
	proxy.SetDropReplies(false)
	proxy.Cut()
	direct, err := kubelock.New(kubelock.Config{Client: kubelock.ClientGo(kube.Client.CoreV1()), Namespace: kube.Namespace, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := locking.New(locking.Config{Backend: direct, LockID: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	if rec, ok, err := admin.Holder(t.Context()); err != nil || !ok || rec.Holder != "dc1" {
		t.Fatalf("Holder = %+v, %v, %v; want dc1, whose write was applied", rec, ok, err)
	}
}

// TestCommitCutReportsUnknownResult cuts the connection, and refuses new
// ones, after a Take has read the lock and before it writes: the Take must
// fail with ErrUnknownResult or ErrUnavailable, never report success, and
// the lock is then free for another instance.
func TestCommitCutReportsUnknownResult(t *testing.T) {
	kube, proxy, client := viaProxy(t)
	name := fmt.Sprintf("lock-%d", seq.Add(1))
	through, err := kubelock.New(kubelock.Config{Client: kubelock.ClientGo(client.CoreV1()), Namespace: kube.Namespace, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	cut := beforeCommit{Backend: through, do: func() { proxy.SetDown(true); proxy.Cut() }}
	dc1, err := locking.New(locking.Config{Backend: cut, LockID: "dc1", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	_, err = dc1.Take(ctx)
	if !errors.Is(err, locking.ErrUnavailable) {
		t.Fatalf("Take with the connection cut before its write = %v, want ErrUnavailable", err)
	}
	t.Logf("Take: %v", err)
	proxy.SetDown(false)
	direct, err := kubelock.New(kubelock.Config{Client: kubelock.ClientGo(kube.Client.CoreV1()), Namespace: kube.Namespace, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	dc2, err := locking.New(locking.Config{Backend: direct, LockID: "dc2"})
	if err != nil {
		t.Fatal(err)
	}
	if lease, err := dc2.Take(t.Context()); err != nil || lease.Outcome != locking.OutcomeTaken {
		t.Fatalf("dc2 Take = %+v, %v; want Taken", lease, err)
	}
}

// beforeCommit calls do after fn has run (its reads are done) and before
// the backend commits.
type beforeCommit struct {
	locking.Backend
	do func()
}

func (c beforeCommit) Update(ctx context.Context, fn func(locking.Txn) error) error {
	return c.Backend.Update(ctx, func(tx locking.Txn) error {
		err := fn(tx)
		c.do()
		return err
	})
}
