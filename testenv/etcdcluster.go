package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// EtcdCluster is a multi-member etcd cluster on loopback that belongs to
// one test, whose members the test may kill, stop, wipe and start again
// with another view of the cluster (a recovery that starts one member as a
// new cluster and adds the others back). It stops when the test ends.
type EtcdCluster struct {
	// Members are the members in the order of the initial cluster.
	Members []*EtcdMember
}

// EtcdMember is one member of an EtcdCluster: an etcd process with its own
// ports and data directory. Its process keeps its ports across restarts.
type EtcdMember struct {
	// Name is the member's name in the cluster (--name).
	Name string
	// ClientURL and PeerURL are the member's client and peer URLs.
	ClientURL, PeerURL string
	// DataDir is the member's data directory (--data-dir).
	DataDir string
	// Process is the member's etcd process. Its Start waits until the
	// process serves its peer port, not until the member is healthy: a
	// member without quorum never is.
	Process *Component
}

// StartEtcdCluster starts an etcd cluster of n members (n >= 1) for this
// test alone and waits until every member is healthy (a leader is
// elected). Each member costs ~50 MB of memory.
func StartEtcdCluster(t testing.TB, n int) *EtcdCluster {
	t.Helper()
	skipInShortMode(t)
	c, err := startEtcdCluster(t, n)
	if err != nil {
		unavailable(t, err)
	}
	return c
}

func startEtcdCluster(t testing.TB, n int) (*EtcdCluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("etcd cluster of %d members: want at least 1", n)
	}
	path, err := binary("etcd")
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	dir := t.TempDir()
	c := &EtcdCluster{}
	for i := range n {
		m := &EtcdMember{
			Name:      fmt.Sprintf("member-%d", i),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1]),
		}
		mdir := filepath.Join(dir, m.Name)
		if err := os.MkdirAll(mdir, 0o755); err != nil {
			return nil, err
		}
		m.DataDir = filepath.Join(mdir, "data")
		peer := m.PeerURL
		m.Process = &Component{
			name: "etcd", dir: mdir, path: path,
			ready: func(ctx context.Context) error { return httpOK(ctx, peer+"/version") },
		}
		c.Members = append(c.Members, m)
	}
	for _, m := range c.Members {
		if err := m.Configure(c.InitialCluster(), "new"); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The members start together: none is healthy before a quorum runs.
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, m := range c.Members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = m.Process.Start(ctx)
		}()
	}
	wg.Wait()
	for _, m := range c.Members {
		t.Cleanup(m.Process.stopQuietly)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, m := range c.Members {
		if err := m.WaitHealthy(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Endpoints returns the client URLs of all members.
func (c *EtcdCluster) Endpoints() []string {
	out := make([]string, len(c.Members))
	for i, m := range c.Members {
		out[i] = m.ClientURL
	}
	return out
}

// InitialCluster returns the --initial-cluster value of all members:
// name=peerURL, comma-separated.
func (c *EtcdCluster) InitialCluster() string {
	parts := make([]string, len(c.Members))
	for i, m := range c.Members {
		parts[i] = m.Name + "=" + m.PeerURL
	}
	return strings.Join(parts, ",")
}

// Configure sets the member's view of the cluster for its next start with
// an empty data directory (--initial-cluster, --initial-cluster-state "new"
// or "existing"); etcd ignores both when the data directory has a member
// already. It fails while the process runs.
func (m *EtcdMember) Configure(initialCluster, state string) error {
	if state != "new" && state != "existing" {
		return fmt.Errorf("etcd member %s: initial cluster state %q, want new or existing", m.Name, state)
	}
	p := m.Process
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running() {
		return fmt.Errorf("configure etcd member %s: it is running; stop it first", m.Name)
	}
	p.args = []string{
		"--name=" + m.Name,
		"--data-dir=" + m.DataDir,
		"--listen-client-urls=" + m.ClientURL,
		"--advertise-client-urls=" + m.ClientURL,
		"--listen-peer-urls=" + m.PeerURL,
		"--initial-advertise-peer-urls=" + m.PeerURL,
		"--initial-cluster=" + initialCluster,
		"--initial-cluster-state=" + state,
		"--initial-cluster-token=testenv",
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
	return nil
}

// RemoveData deletes the member's data directory, as a lost volume. It
// fails while the process runs.
func (m *EtcdMember) RemoveData() error {
	p := m.Process
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running() {
		return fmt.Errorf("remove data of etcd member %s: it is running; stop it first", m.Name)
	}
	return os.RemoveAll(m.DataDir)
}

// WaitHealthy waits until the member answers /health with 200 (it is part
// of a cluster that has a leader), or ctx ends.
func (m *EtcdMember) WaitHealthy(ctx context.Context) error {
	var last error
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = httpOK(actx, m.ClientURL+"/health")
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcd member %s not healthy: %w (log: %s)", m.Name, last, m.Process.LogPath())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
