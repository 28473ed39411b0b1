package plugin_test

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/cmd/kubectl-groundskeeper/plugin"
	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/etcdlock"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// etcdLock is the lock as the operator instance id uses it, in etcd under
// the test's prefix, at the fake time clk; args are the flags that name it.
func etcdLock(t *testing.T, etcd *testenv.Etcd, id string, clk *clocktesting.FakeClock) (*locking.Lock, *etcdlock.Backend, []string) {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	b, err := etcdlock.New(etcdlock.Config{KV: c, Prefix: etcd.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	l, err := locking.New(locking.Config{Backend: b, LockID: id, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return l, b, []string{"--etcd-endpoints", strings.Join(etcd.Endpoints, ","), "--etcd-prefix", etcd.Prefix}
}

// etcdGolden replaces the test's etcd prefix and endpoints with
// placeholders, for golden, and the padding between a table's columns
// (which depends on the prefix's length) with three spaces.
func etcdGolden(etcd *testenv.Etcd, s string) string {
	s = strings.ReplaceAll(s, etcd.Prefix, "/PREFIX/")
	for _, ep := range etcd.Endpoints {
		s = strings.ReplaceAll(s, ep, "http://ENDPOINT")
	}
	return padding.ReplaceAllString(s, "$1   ")
}

var padding = regexp.MustCompile(`(\S) {2,}`)

func TestLockInEtcd(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(t0)
	l, b, flags := etcdLock(t, etcd, "operator-a", clk)
	lock := func(args ...string) []string { return append(args, flags...) }
	opts := plugin.Options{Clock: clocktesting.NewFakeClock(t0.Add(4 * time.Minute))}

	r := run(t, opts, lock("lock")...)
	if r.code != 0 || !strings.Contains(r.out, "<none>") {
		t.Errorf("a lock never taken: exit %d:\n%s%s", r.code, r.out, r.err)
	}
	if _, err := l.Take(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.UpdateDenyList(ctx, []locking.DenyListEntry{{ID: "operator-b"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := l.AddPendingUpgrades(ctx, "7.1.26", []string{"storage-1", "storage-2"}); err != nil {
		t.Fatal(err)
	}
	r = run(t, opts, lock("lock")...)
	if r.code != 0 {
		t.Fatalf("lock: exit %d: %s", r.code, r.err)
	}
	golden(t, "lock-etcd.txt", etcdGolden(etcd, r.out), nil)
	r = run(t, opts, lock("lock", "-o", "json")...)
	golden(t, "lock-etcd.json", etcdGolden(etcd, r.out), nil)

	t.Run("deny is a dry run without --yes", func(t *testing.T) {
		r := run(t, opts, lock("lock", "deny", "operator-c")...)
		if r.code != 0 || !strings.Contains(r.out, "lock etcd:"+etcd.Prefix+": add operator-c to the deny list") || !strings.Contains(r.out, "dry run: nothing changed") {
			t.Errorf("exit %d, output does not print the plan and the dry run:\n%s", r.code, r.out)
		}
		if got := denyList(t, l); !slices.Equal(got, []string{"operator-b"}) {
			t.Errorf("deny list after a dry run = %v, want [operator-b]", got)
		}
	})
	t.Run("deny and allow with --yes", func(t *testing.T) {
		r := run(t, opts, lock("lock", "deny", "operator-c", "--yes")...)
		if r.code != 0 || !strings.Contains(r.out, "operator-c denied") {
			t.Errorf("deny --yes: exit %d:\n%s", r.code, r.out)
		}
		r = run(t, opts, lock("lock", "allow", "operator-b", "--yes")...)
		if r.code != 0 || !strings.Contains(r.out, "operator-b allowed") {
			t.Errorf("allow --yes: exit %d:\n%s", r.code, r.out)
		}
		if got := denyList(t, l); !slices.Equal(got, []string{"operator-c"}) {
			t.Errorf("deny list = %v, want [operator-c]", got)
		}
		rec, ok, err := l.Holder(ctx)
		if err != nil || !ok || rec.Holder != "operator-a" {
			t.Errorf("the lock record changed: %+v %v %v", rec, ok, err)
		}
	})
	t.Run("malformed record", func(t *testing.T) {
		// tuple{lockID, start, end} with a byte string (type code 0x01)
		// for the lockID, not a unicode string.
		garbage := []byte("\x01operator-a\x00\x15\x01\x15\x02")
		if err := b.Update(ctx, func(tx locking.Txn) error {
			return tx.Set([]byte(locking.DefaultPrefix+"/global"), garbage)
		}); err != nil {
			t.Fatal(err)
		}
		oneLineError(t, run(t, opts, lock("lock")...), plugin.ExitError, etcd.Prefix, "global", "lockID is []uint8, want a unicode string")
	})
}

func TestLockInEtcdBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"--etcd-endpoints", "127.0.0.1:2379"}, plugin.ExitUsage, []string{"--etcd-endpoints", "127.0.0.1:2379"}},
		{[]string{"--etcd-endpoints", "http://127.0.0.1:2379", "--configmap", "gk-lock"}, plugin.ExitUsage, []string{"--configmap gk-lock", "--etcd-endpoints"}},
		{[]string{"--etcd-endpoints", "https://127.0.0.1:2379", "--etcd-cert", "c.pem"}, plugin.ExitUsage, []string{"--etcd-cert", "c.pem", "--etcd-key"}},
		{[]string{"--etcd-endpoints", "https://127.0.0.1:2379", "--etcd-cacert", "/no/such/ca.pem"}, plugin.ExitUsage, []string{"--etcd-cacert", "/no/such/ca.pem"}},
		{[]string{"--etcd-endpoints", "http://127.0.0.1:2379", "--etcd-dial-timeout", "0s"}, plugin.ExitUsage, []string{"--etcd-dial-timeout", "0s"}},
	} {
		oneLineError(t, run(t, plugin.Options{}, append([]string{"lock"}, c.args...)...), c.code, c.want...)
	}
}

// TestLockInEtcdUnreachable waits the dial timeout (1s) on an endpoint
// where nothing listens: the timeout is what is tested.
func TestLockInEtcdUnreachable(t *testing.T) {
	r := run(t, plugin.Options{}, "lock", "--etcd-endpoints", "http://127.0.0.1:1", "--etcd-prefix", "/p/", "--etcd-dial-timeout", "1s")
	oneLineError(t, r, plugin.ExitError, "http://127.0.0.1:1", "no endpoint answered within 1s")
}

// screen is a command's output as it is written, safe to read while the
// command runs, with a signal each time more arrives.
type screen struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	more chan struct{}
}

func (s *screen) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.buf.Write(p)
	select {
	case s.more <- struct{}{}:
	default:
	}
	return n, err
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitFor blocks until the output holds n copies of want, or fails the
// test when the command ends first.
func (s *screen) waitFor(t *testing.T, want string, n int, done <-chan int) {
	t.Helper()
	for strings.Count(s.String(), want) < n {
		select {
		case <-s.more:
		case code := <-done:
			t.Fatalf("the command ended (exit %d) before it printed %q %d times:\n%s", code, want, n, s.String())
		}
	}
}

// watchCommand runs the command with args until the returned stop is
// called, as a person's Ctrl-C ends it; stop returns its exit code.
func watchCommand(t *testing.T, opts plugin.Options, args ...string) (*screen, <-chan int, func() int) {
	t.Helper()
	out := &screen{more: make(chan struct{}, 1)}
	var errOut bytes.Buffer
	opts.Streams = &genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: &errOut}
	cmd := plugin.NewCommand(opts)
	cmd.SetArgs(args)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		if err := cmd.ExecuteContext(ctx); err != nil {
			errOut.WriteString(err.Error())
			done <- plugin.ExitError
			return
		}
		done <- plugin.ExitOK
	}()
	stop := func() int {
		cancel()
		code := <-done
		t.Logf("$ kubectl groundskeeper %s\n%s%s(exit %d)", strings.Join(args, " "), out.String(), errOut.String(), code)
		return code
	}
	t.Cleanup(func() { cancel() })
	return out, done, stop
}

// testWatch changes the lock l three times while lock --watch runs, and
// checks that each change is printed once, and nothing else.
func testWatch(t *testing.T, l *locking.Lock, clk *clocktesting.FakeClock, opts plugin.Options, args ...string) {
	ctx := context.Background()
	out, done, stop := watchCommand(t, opts, append(args, "--watch")...)
	out.waitFor(t, "<none>", 1, done)

	if _, err := l.Take(ctx); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "operator-a   2026-01-15T09:00:00Z   2026-01-15T09:10:00Z", 1, done)
	if _, err := l.UpdateDenyList(ctx, []locking.DenyListEntry{{ID: "operator-b"}}, nil); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "DENIED\noperator-b\n", 1, done)
	clk.Step(time.Minute)
	if _, err := l.Take(ctx); err != nil { // an extension: a new end
		t.Fatal(err)
	}
	out.waitFor(t, "2026-01-15T09:11:00Z", 1, done)
	if code := stop(); code != plugin.ExitOK {
		t.Errorf("interrupted watch: exit %d, want 0", code)
	}
	if n := strings.Count(out.String(), "LOCK "); n != 4 {
		t.Errorf("the lock was printed %d times, want 4: once, then once for each of the 3 changes:\n%s", n, out.String())
	}
}

func TestLockWatch(t *testing.T) {
	t.Run("ConfigMap", func(t *testing.T) {
		k := testenv.StartKubernetes(t)
		clk := clocktesting.NewFakeClock(t0)
		l, _ := operatorLock(t, k, "operator-a", clk)
		testWatch(t, l, clk, plugin.Options{LockName: "gk-lock", Clock: clk}, kube(k, "lock")...)
	})
	t.Run("etcd", func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		l, _, flags := etcdLock(t, testenv.StartEtcd(t), "operator-a", clk)
		testWatch(t, l, clk, plugin.Options{Clock: clk}, append([]string{"lock"}, flags...)...)
	})
}
