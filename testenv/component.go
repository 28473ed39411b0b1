package testenv

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Component is one process of an isolated environment ([StartIsolatedKubernetes],
// [StartIsolatedS3], [StartIsolatedGCS], [StartIsolatedAzure]) that its test
// may stop, start again, restart and kill. Every start runs the same command
// line: the same ports and the same data directory, so clients reconnect to
// the address they had and find the data the store kept (see the package
// doc for what each store keeps). Its methods are safe for concurrent use.
type Component struct {
	name  string
	dir   string // working directory, log file
	path  string
	args  []string
	env   []string
	ready func(ctx context.Context) error

	mu   sync.Mutex
	proc *process // nil before the first start
}

// ErrNotRunning is returned by Stop and Kill of a component that is not
// running.
var ErrNotRunning = errors.New("testenv: component not running")

// Name is the component's name, e.g. "etcd" or "kube-apiserver".
func (c *Component) Name() string { return c.name }

// LogPath is the file that holds the output of every run of the component.
func (c *Component) LogPath() string { return c.dir + "/" + c.name + ".log" }

// Running reports whether the component's process is alive.
func (c *Component) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.running()
}

func (c *Component) running() bool {
	if c.proc == nil {
		return false
	}
	select {
	case <-c.proc.done:
		return false
	default:
		return true
	}
}

// Start starts the component if it is not running and waits until it is
// ready or ctx ends. The ports it listens on were free when the environment
// started; if another process took one while the component was stopped,
// Start fails with the component's log, which says so.
func (c *Component) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running() {
		return nil
	}
	p, err := startProcess(c.name, c.dir, c.env, c.path, c.args...)
	if err != nil {
		return err
	}
	c.proc = p
	return p.waitReadyCtx(ctx, c.ready)
}

// Stop terminates the component with SIGTERM, as an orderly shutdown, and
// waits for it to exit; when ctx ends first, it kills it with SIGKILL.
func (c *Component) Stop(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running() {
		return fmt.Errorf("stop %s: %w", c.name, ErrNotRunning)
	}
	_ = syscall.Kill(-c.proc.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-c.proc.done:
	case <-ctx.Done():
		_ = syscall.Kill(-c.proc.cmd.Process.Pid, syscall.SIGKILL)
		<-c.proc.done
	}
	return nil
}

// Kill kills the component with SIGKILL, a crash with no chance to flush
// or say goodbye, and waits for it to exit.
func (c *Component) Kill() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running() {
		return fmt.Errorf("kill %s: %w", c.name, ErrNotRunning)
	}
	_ = syscall.Kill(-c.proc.cmd.Process.Pid, syscall.SIGKILL)
	<-c.proc.done
	return nil
}

// Restart stops the component (SIGTERM, SIGKILL when ctx ends) if it runs,
// then starts it and waits until it is ready.
func (c *Component) Restart(ctx context.Context) error {
	if err := c.Stop(ctx); err != nil && !errors.Is(err, ErrNotRunning) {
		return err
	}
	return c.Start(ctx)
}

// newComponent starts a component for the test and stops it when the test
// ends. dir is the component's working directory, usually in t.TempDir.
func newComponent(t testing.TB, c *Component) (*Component, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		c.stopQuietly()
		return nil, err
	}
	t.Cleanup(c.stopQuietly)
	return c, nil
}

func (c *Component) stopQuietly() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.Stop(ctx)
}
