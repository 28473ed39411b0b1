package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/groundskeeper-io/groundskeeper/testenv/faultproxy"
)

// IsolatedKubernetes is a control plane that belongs to one test, so that
// the test may restart, stop and kill its components without pulling them
// from under other tests. Its Kubernetes fields are as for
// [StartKubernetes]; Config talks to the API server directly.
type IsolatedKubernetes struct {
	Kubernetes

	// Etcd, APIServer and ControllerManager are the control plane's
	// processes.
	Etcd, APIServer, ControllerManager *Component
	// EtcdProxy sits between kube-apiserver and etcd: its faults are faults
	// of the API server's storage, while clients reach the API server
	// unhindered.
	EtcdProxy *faultproxy.Proxy
	// EtcdEndpoint is etcd's client URL, for a test's own etcd client.
	EtcdEndpoint string
	// AuditLog is the API server's audit log (JSON lines, one
	// audit.k8s.io/v1 Event each): every delete and deletecollection
	// request when received and, with its response, when complete, at
	// level RequestResponse. The file survives API server restarts; a
	// request in flight when the API server is killed has only its
	// receipt, and a request whose client was cut off may end in a server
	// error although etcd deleted the object.
	AuditLog string
}

// StartIsolatedKubernetes starts a control plane (etcd, kube-apiserver,
// kube-controller-manager) for this test alone, and a namespace in it. It
// stops when the test ends. Its StartNodes starts a kube-scheduler of its
// own ([Nodes.Scheduler]). Starting one takes a few seconds and ~300 MB of
// memory: use the shared [StartKubernetes] unless the test injects faults
// into the components themselves.
func StartIsolatedKubernetes(t testing.TB) *IsolatedKubernetes {
	t.Helper()
	skipInShortMode(t)
	k, err := startIsolatedKubernetes(t)
	if err != nil {
		unavailable(t, err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: uniqueName(t, 63)}}
	if _, err := k.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("testenv: create namespace %s: %v", ns.Name, err)
	}
	k.Namespace = ns.Name
	return k
}

func startIsolatedKubernetes(t testing.TB) (*IsolatedKubernetes, error) {
	paths := map[string]string{}
	for _, name := range []string{"etcd", "kube-apiserver", "kube-controller-manager"} {
		path, err := binary(name)
		if err != nil {
			return nil, err
		}
		paths[name] = path
	}
	dir := t.TempDir()
	var clientURL string
	etcd, err := onFreePorts(2, func(ports []int) (*Component, error) {
		clientURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
		peerURL := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		return newComponent(t, &Component{
			name: "etcd", dir: dir, path: paths["etcd"],
			args:  etcdArgs(filepath.Join(dir, "etcd-data"), clientURL, peerURL),
			ready: func(ctx context.Context) error { return httpOK(ctx, clientURL+"/health") },
		})
	})
	if err != nil {
		return nil, err
	}
	proxy, err := faultproxy.New(strings.TrimPrefix(clientURL, "http://"))
	if err != nil {
		return nil, err
	}
	// Cleanups run last-in first-out: the proxy closes after the API
	// server stopped and before etcd stops.
	t.Cleanup(func() { proxy.Close() })

	token, err := prepareControlPlane(dir)
	if err != nil {
		return nil, err
	}
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	auditLog := filepath.Join(dir, "audit.log")
	apiserver, host, err := startIsolatedAPIServer(t, dir, paths["kube-apiserver"], "http://"+proxy.Addr(), token, auditLog, insecure)
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(kubeconfigFor(host, token)), 0o600); err != nil {
		return nil, err
	}
	kcm, err := startIsolatedControllerManager(t, dir, paths["kube-controller-manager"], kubeconfig, insecure)
	if err != nil {
		return nil, err
	}
	config := &rest.Config{
		Host:            host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             1000,
		Burst:           2000,
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	plane := &controlPlane{config: config, kubeconfig: kubeconfig, scheduler: isolatedScheduler(t, dir, kubeconfig)}
	return &IsolatedKubernetes{
		Kubernetes:        Kubernetes{Config: config, Client: client, Kubeconfig: kubeconfig, plane: plane},
		Etcd:              etcd,
		APIServer:         apiserver,
		ControllerManager: kcm,
		EtcdProxy:         proxy,
		EtcdEndpoint:      clientURL,
		AuditLog:          auditLog,
	}, nil
}

// startIsolatedAPIServer starts an isolated control plane's API server at
// path, on etcd at etcdURL, logging deletions to auditLog
// (deleteAuditPolicy), and returns it with its URL.
func startIsolatedAPIServer(t testing.TB, dir, path, etcdURL, token, auditLog string, insecure *http.Client) (*Component, string, error) {
	auditPolicy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(auditPolicy, []byte(deleteAuditPolicy), 0o600); err != nil {
		return nil, "", err
	}
	var host string
	apiserver, err := onFreePorts(1, func(ports []int) (*Component, error) {
		host = fmt.Sprintf("https://127.0.0.1:%d", ports[0])
		return newComponent(t, &Component{
			name: "kube-apiserver", dir: dir, path: path,
			args: append(apiserverArgs(dir, etcdURL, ports[0]),
				"--audit-policy-file="+auditPolicy, "--audit-log-path="+auditLog,
				"--audit-log-mode=blocking"),
			ready: func(ctx context.Context) error { return httpOKWith(ctx, insecure, host+"/readyz", token) },
		})
	})
	return apiserver, host, err
}

// startIsolatedControllerManager starts an isolated control plane's
// controller manager at path. It serves /healthz on its own port here, so
// that a restart can wait until it is up.
func startIsolatedControllerManager(t testing.TB, dir, path, kubeconfig string, insecure *http.Client) (*Component, error) {
	return onFreePorts(1, func(ports []int) (*Component, error) {
		kcmArgs := controllerManagerArgs(kubeconfig)
		for i, a := range kcmArgs {
			if a == "--secure-port=0" {
				kcmArgs[i] = fmt.Sprintf("--secure-port=%d", ports[0])
			}
		}
		kcmArgs = append(kcmArgs, "--bind-address=127.0.0.1", "--cert-dir="+filepath.Join(dir, "kcm-certs"))
		kcmHealth := fmt.Sprintf("https://127.0.0.1:%d/healthz", ports[0])
		return newComponent(t, &Component{
			name: "kube-controller-manager", dir: dir, path: path,
			args:  kcmArgs,
			ready: func(ctx context.Context) error { return httpOKWith(ctx, insecure, kcmHealth, "") },
		})
	})
}

// deleteAuditPolicy logs every delete request when it is received and,
// with its response, once it is complete, and nothing else: a request the
// API server received but was killed before completing is in the log.
const deleteAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["ResponseStarted"]
rules:
- level: RequestResponse
  verbs: ["delete", "deletecollection"]
- level: None
`

// ConfigVia returns a copy of k's Config that reaches the API server
// through p, a proxy to the API server's address (k.Config.Host without
// the scheme).
func (k *Kubernetes) ConfigVia(p *faultproxy.Proxy) *rest.Config {
	c := rest.CopyConfig(k.Config)
	c.Host = "https://" + p.Addr()
	return c
}

// IsolatedBlobStore is an object store server that belongs to one test, and
// a bucket on it.
type IsolatedBlobStore struct {
	BlobStore
	// Server is the store's process.
	Server *Component
}

// StartIsolatedS3 starts a MinIO server for this test alone, with a bucket
// made as o says. It stops when the test ends. Objects, buckets and their
// settings survive Stop, Restart and Kill: MinIO keeps them on disk.
func StartIsolatedS3(t testing.TB, o BucketOptions) *IsolatedBlobStore {
	t.Helper()
	return startIsolatedBlob(t, 2, func(ports []int) blobServerSpec { return minIOSpec(ports[1]) }, func(endpoint string) (*BlobStore, error) {
		return s3Bucket(endpoint, uniqueName(t, 63), o)
	})
}

// StartIsolatedGCS starts a fake-gcs-server for this test alone, keeping
// its data in files, with a bucket made as o says. It stops when the test
// ends. The bucket's URL is empty: gocloud reaches a GCS emulator only
// through the process-wide STORAGE_EMULATOR_HOST, which belongs to the
// shared server; use Endpoint (the JSON API) instead.
func StartIsolatedGCS(t testing.TB, o BucketOptions) *IsolatedBlobStore {
	t.Helper()
	spec := fakeGCSSpec(true)
	spec.urlEnv = nil
	return startIsolatedBlob(t, 1, func([]int) blobServerSpec { return spec }, func(endpoint string) (*BlobStore, error) {
		return gcsBucket(endpoint, uniqueName(t, 63), o)
	})
}

// StartIsolatedAzure starts an Azurite blob server for this test alone,
// keeping its data in files, with a container. It stops when the test ends.
func StartIsolatedAzure(t testing.TB) *IsolatedBlobStore {
	t.Helper()
	return startIsolatedBlob(t, 1, func([]int) blobServerSpec { return azuriteSpec(true) }, func(endpoint string) (*BlobStore, error) {
		return azureContainer(endpoint, uniqueName(t, 63))
	})
}

// startIsolatedBlob starts the server specFor gives on n free ports (the
// first serves the endpoint) and makes its bucket.
func startIsolatedBlob(t testing.TB, n int, specFor func(ports []int) blobServerSpec, bucket func(endpoint string) (*BlobStore, error)) *IsolatedBlobStore {
	t.Helper()
	skipInShortMode(t)
	spec := specFor(make([]int, n))
	path, err := binary(spec.name)
	if err != nil {
		unavailable(t, err)
	}
	dir := t.TempDir()
	var endpoint string
	c, err := onFreePorts(n, func(ports []int) (*Component, error) {
		spec := specFor(ports)
		endpoint = fmt.Sprintf("127.0.0.1:%d", ports[0])
		return newComponent(t, &Component{
			name: spec.name, dir: dir, path: path,
			args:  spec.args(dir, endpoint, ports[0]),
			env:   spec.env,
			ready: func(ctx context.Context) error { return spec.ready(ctx, endpoint) },
		})
	})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	// The variables hold the same credentials for every server of a
	// kind, so setting them again does not disturb the shared one.
	for k, v := range spec.urlEnv {
		if !strings.Contains(v, "{endpoint}") {
			os.Setenv(k, v)
		}
	}
	b, err := bucket(endpoint)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return &IsolatedBlobStore{BlobStore: *b, Server: c}
}

// onFreePorts starts a component on n loopback ports found free, and again
// on others, up to three times in all, when it could not bind one: another
// process may take a port found free before the component binds it, and
// many test binaries start components at once.
func onFreePorts[T any](n int, start func(ports []int) (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for range 3 {
		var ports []int
		if ports, err = freePorts(n); err != nil {
			return v, err
		}
		if v, err = start(ports); err == nil || !strings.Contains(err.Error(), "address already in use") {
			return v, err
		}
	}
	return v, err
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	seen := map[int]bool{}
	var ports []int
	for len(ports) < n {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		if !seen[p] {
			seen[p] = true
			ports = append(ports, p)
		}
	}
	return ports, nil
}
