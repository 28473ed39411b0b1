package plugin_test

import (
	"bytes"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/creack/pty"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/cmd/kubectl-groundskeeper/plugin"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// terminal is what a person sees of a pseudo-terminal: every byte the
// command wrote, and a signal each time more arrives.
type terminal struct {
	mu   sync.Mutex
	seen bytes.Buffer
	more chan struct{}
}

// waitFor blocks until the screen shows s, or the command ended.
func (tm *terminal) waitFor(t *testing.T, s string, done <-chan int) {
	t.Helper()
	for {
		tm.mu.Lock()
		ok := strings.Contains(tm.seen.String(), s)
		tm.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-tm.more:
		case code := <-done:
			t.Fatalf("the command ended (exit %d) before the terminal showed %q:\n%s", code, s, tm.screen())
		}
	}
}

func (tm *terminal) screen() string {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	return tm.seen.String()
}

// onTerminal runs the command with a pseudo-terminal as its stdin and
// stdout, as in a person's shell.
func onTerminal(t *testing.T, opts plugin.Options, args ...string) (*terminal, func(string), <-chan int) {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptmx.Close(); tty.Close() })
	tm := &terminal{more: make(chan struct{}, 1)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			if n > 0 {
				tm.mu.Lock()
				tm.seen.Write(buf[:n])
				tm.mu.Unlock()
				select {
				case tm.more <- struct{}{}:
				default:
				}
			}
			if err != nil {
				return
			}
		}
	}()
	var errOut bytes.Buffer
	opts.Streams = &genericiooptions.IOStreams{In: tty, Out: tty, ErrOut: &errOut}
	done := make(chan int, 1)
	go func() { done <- plugin.Main(opts, args) }()
	typeIn := func(s string) {
		if _, err := ptmx.Write([]byte(s)); err != nil {
			t.Errorf("type %q: %v", s, err)
		}
	}
	return tm, typeIn, done
}

func TestLockDenyAsksOnATerminal(t *testing.T) {
	k := testenv.StartKubernetes(t)
	l, _ := operatorLock(t, k, "operator-a", clocktesting.NewFakeClock(t0))
	opts := plugin.Options{LockName: "gk-lock"}

	t.Run("no", func(t *testing.T) {
		tm, typeIn, done := onTerminal(t, opts, kube(k, "lock", "deny", "operator-c")...)
		tm.waitFor(t, "deny operator-c? [y/N] ", done)
		typeIn("n\r")
		if code := <-done; code != 0 {
			t.Errorf("exit %d", code)
		}
		tm.waitFor(t, "dry run: nothing changed", nil)
		if got := denyList(t, l); len(got) != 0 {
			t.Errorf("answered no, deny list = %v", got)
		}
	})
	t.Run("yes", func(t *testing.T) {
		tm, typeIn, done := onTerminal(t, opts, kube(k, "lock", "deny", "operator-c")...)
		tm.waitFor(t, "add operator-c to the deny list: it will be refused the lock", done)
		tm.waitFor(t, "deny operator-c? [y/N] ", done)
		typeIn("y\r")
		if code := <-done; code != 0 {
			t.Errorf("exit %d", code)
		}
		tm.waitFor(t, "operator-c denied", nil)
		if got := denyList(t, l); !slices.Equal(got, []string{"operator-c"}) {
			t.Errorf("answered yes, deny list = %v, want [operator-c]", got)
		}
		t.Logf("the terminal showed:\n%s", tm.screen())
	})
}
