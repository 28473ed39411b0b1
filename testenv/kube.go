package testenv

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Controllers are the kube-controller-manager controllers that run, so that
// owner-reference cascades, the PVC protection finalizer and the claims'
// Unused condition, the StatefulSet PVC retention policy and namespace
// deletion behave as in a cluster:
//
//   - garbagecollector, namespace, statefulset: as in a cluster.
//   - pvc-protection: keeps a claim a pod uses (the
//     kubernetes.io/pvc-protection finalizer) and, on Kubernetes 1.37, sets
//     the Unused condition of Bound claims.
//   - podgc: force-deletes pods left terminating where no kubelet will
//     finish them (unscheduled ones; those of a node that was deleted):
//     deleting a pod is two writes (mark it, then remove it), and an API
//     server that fails between them leaves it marked for good.
//   - persistentvolume-binder and pv-protection: bind claims to
//     PersistentVolumes (see [Kubernetes.NewVolumePool]) and release them. A claim
//     that names no StorageClass stays Pending: no class is the default.
//     A claim's Bound status cannot be written by hand here (the binder
//     sets a claim bound to no volume back to Pending): bind it to a volume.
//   - nodelifecycle and taint-eviction-controller: a node whose lease is not
//     renewed for [NodeMonitorGracePeriod] becomes NotReady (Unknown), its
//     pods not ready, and, after the pods' toleration of the unreachable
//     taint ([DefaultTolerationSeconds] unless they say), they are evicted
//     (deleted, and left Terminating until the node answers again).
//
// Without [Kubernetes.StartNodes] there is no scheduler and no node: pods
// stay Pending and unscheduled, and deleting one is immediate.
var Controllers = []string{"garbagecollector", "pvc-protection", "statefulset", "namespace", "podgc",
	"persistentvolume-binder", "pv-protection", "nodelifecycle", "taint-eviction-controller"}

// NodeMonitorGracePeriod is how long the node-lifecycle controller waits for
// a node's heartbeat before it marks the node NotReady (Unknown): 10 s here,
// 50 s in a cluster by default. KWOK renews each node's lease every second.
const NodeMonitorGracePeriod = 10 * time.Second

// DefaultTolerationSeconds is how long a pod that tolerates nothing more
// stays bound to a node that is not ready or not reachable before the
// taint-eviction controller evicts it (the API server adds these
// tolerations to every pod): 20 s here, 300 s in a cluster by default.
const DefaultTolerationSeconds = 20

// Kubernetes is a real control plane (etcd, kube-apiserver,
// kube-controller-manager) on loopback, shared by the tests of one package.
type Kubernetes struct {
	// Config authenticates as a cluster administrator (group system:masters).
	Config *rest.Config
	// Client is a clientset built from Config.
	Client kubernetes.Interface
	// Namespace was created for this test and is deleted when it ends.
	Namespace string
	// Kubeconfig is the path of a kubeconfig file for Config, for programs
	// run as separate processes.
	Kubeconfig string

	// plane is the control plane this belongs to, which StartNodes starts
	// a scheduler in; nil in a Kubernetes made by hand.
	plane *controlPlane
}

type controlPlane struct {
	config     *rest.Config
	kubeconfig string
	// scheduler starts the plane's kube-scheduler, once; the isolated
	// plane's is a Component.
	scheduler func() (*Component, error)
}

var kubeOnce shared[*controlPlane]

// StartKubernetes returns the shared control plane, starting it on first use,
// and a fresh namespace for the test.
func StartKubernetes(t testing.TB) *Kubernetes {
	t.Helper()
	skipInShortMode(t)
	cp, err := kubeOnce.get(startControlPlane)
	if err != nil {
		unavailable(t, err)
	}
	client, err := kubernetes.NewForConfig(cp.config)
	if err != nil {
		t.Fatalf("testenv: clientset: %v", err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: uniqueName(t, 63)}}
	ctx := context.Background()
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("testenv: create namespace %s: %v", ns.Name, err)
	}
	t.Cleanup(func() {
		// The namespace controller removes what is left in it.
		_ = client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
	})
	return &Kubernetes{Config: rest.CopyConfig(cp.config), Client: client, Namespace: ns.Name, Kubeconfig: cp.kubeconfig, plane: cp}
}

func startControlPlane() (*controlPlane, error) {
	apiserverPath, err := binary("kube-apiserver")
	if err != nil {
		return nil, err
	}
	kcmPath, err := binary("kube-controller-manager")
	if err != nil {
		return nil, err
	}
	etcd, err := etcdOnce.get(startEtcd)
	if err != nil {
		return nil, err
	}
	dir, err := tempDir("kube")
	if err != nil {
		return nil, err
	}
	token, err := prepareControlPlane(dir)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	host := fmt.Sprintf("https://127.0.0.1:%d", port)
	apiserver, err := startProcess("kube-apiserver", dir, nil, apiserverPath, apiserverArgs(dir, etcd.url, port)...)
	if err != nil {
		return nil, err
	}
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	err = apiserver.waitReady(90*time.Second, func(ctx context.Context) error {
		return httpOKWith(ctx, insecure, host+"/readyz", token)
	})
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
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(kubeconfigFor(host, token)), 0o600); err != nil {
		return nil, err
	}
	kcm, err := startProcess("kube-controller-manager", dir, nil, kcmPath, controllerManagerArgs(kubeconfig)...)
	if err != nil {
		return nil, err
	}
	// The controller manager serves nothing we can poll with --secure-port=0;
	// a quick exit means it failed.
	select {
	case <-kcm.done:
		return nil, fmt.Errorf("kube-controller-manager exited at start (%v); log %s ends with:\n%s", kcm.err, kcm.logPath, kcm.logTail())
	case <-time.After(500 * time.Millisecond):
	}
	cp := &controlPlane{config: config, kubeconfig: kubeconfig}
	// The shared scheduler lives as long as the test binary, as the rest
	// of the shared plane does.
	var sched shared[*process]
	cp.scheduler = func() (*Component, error) {
		_, err := sched.get(func() (*process, error) { return startSharedScheduler(dir, kubeconfig) })
		return nil, err
	}
	return cp, nil
}

// prepareControlPlane writes the static token file and the service account
// key into dir and returns the admin token.
func prepareControlPlane(dir string) (string, error) {
	token, err := randomToken()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(token+`,admin,admin,"system:masters"`+"\n"), 0o600); err != nil {
		return "", err
	}
	if err := writeServiceAccountKey(filepath.Join(dir, "sa.key")); err != nil {
		return "", err
	}
	return token, nil
}

// apiserverArgs is the command line of kube-apiserver, with its files in
// dir (see prepareControlPlane).
func apiserverArgs(dir, etcdURL string, port int) []string {
	return []string{
		"--etcd-servers=" + etcdURL,
		"--cert-dir=" + filepath.Join(dir, "certs"),
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--token-auth-file=" + filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=AlwaysAllow",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-account-signing-key-file=" + filepath.Join(dir, "sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--disable-admission-plugins=ServiceAccount",
		// A test's nodes take only its own namespace's pods: each node
		// has the label and the taint of its test's namespace, whose
		// annotations give its pods the node selector and the toleration
		// (see StartNodes).
		"--enable-admission-plugins=PodNodeSelector,PodTolerationRestriction",
		fmt.Sprintf("--default-not-ready-toleration-seconds=%d", DefaultTolerationSeconds),
		fmt.Sprintf("--default-unreachable-toleration-seconds=%d", DefaultTolerationSeconds),
		"--allow-privileged=true",
		"--profiling=false",
		// Shut down in about 2 s rather than wait up to 60 s for open
		// watches to end, so that a restart is quick.
		"--shutdown-send-retry-after=true",
	}
}

// controllerManagerArgs is the command line of kube-controller-manager,
// serving nothing itself.
func controllerManagerArgs(kubeconfig string) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(Controllers, ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"--concurrent-gc-syncs=10",
		"--node-monitor-grace-period=" + NodeMonitorGracePeriod.String(),
		"--node-monitor-period=1s",
	}
}

func kubeconfigFor(host, token string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: testenv
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: testenv
  context:
    cluster: testenv
    user: admin
current-context: testenv
`, host, token)
}

func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// writeServiceAccountKey writes an RSA private key, which kube-apiserver uses
// both to sign service account tokens and (its public half) to verify them.
func writeServiceAccountKey(path string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	block := &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}
	return os.WriteFile(path, pem.EncodeToMemory(block), 0o600)
}
