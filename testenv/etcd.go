package testenv

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"
)

// Etcd is a real etcd v3 server on loopback, shared by the tests of one
// package. Each test gets its own key prefix.
type Etcd struct {
	// Endpoints are the client URLs of the server.
	Endpoints []string
	// Prefix is a key prefix that belongs to this test alone, ending in "/".
	Prefix string
}

type etcdServer struct {
	url  string
	proc *process
}

var etcdOnce shared[*etcdServer]

// StartEtcd returns the shared etcd server, starting it on first use. Keys
// under "/registry" belong to the Kubernetes API server when one runs.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	skipInShortMode(t)
	s, err := etcdOnce.get(startEtcd)
	if err != nil {
		unavailable(t, err)
	}
	return &Etcd{Endpoints: []string{s.url}, Prefix: "/groundskeeper-test/" + uniqueName(t, 200) + "/"}
}

func startEtcd() (*etcdServer, error) {
	path, err := binary("etcd")
	if err != nil {
		return nil, err
	}
	dir, err := tempDir("etcd")
	if err != nil {
		return nil, err
	}
	clientPort, err := freePort()
	if err != nil {
		return nil, err
	}
	peerPort, err := freePort()
	if err != nil {
		return nil, err
	}
	clientURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	p, err := startProcess("etcd", dir, nil, path, etcdArgs(dir+"/data", clientURL, peerURL)...)
	if err != nil {
		return nil, err
	}
	err = p.waitReady(30*time.Second, func(ctx context.Context) error {
		return httpOK(ctx, clientURL+"/health")
	})
	if err != nil {
		return nil, err
	}
	return &etcdServer{url: clientURL, proc: p}, nil
}

// etcdArgs is the command line of a single-member etcd.
func etcdArgs(dataDir, clientURL, peerURL string) []string {
	return []string{
		"--name=testenv",
		"--data-dir=" + dataDir,
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=testenv=" + peerURL,
		"--unsafe-no-fsync",
		"--log-level=warn",
	}
}

// httpOK returns nil when a GET of url answers 200.
func httpOK(ctx context.Context, url string) error {
	return httpOKWith(ctx, http.DefaultClient, url, "")
}

func httpOKWith(ctx context.Context, client *http.Client, url, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	return nil
}
