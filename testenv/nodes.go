package testenv

import (
	"context"
	"crypto/tls"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// NodeOptions configures [Kubernetes.StartNodes]. A nil *NodeOptions means
// the defaults.
type NodeOptions struct {
	// Count is the number of nodes; 0 means 1.
	Count int
}

// Nodes are fake nodes of one test: Node objects whose kubelet is KWOK
// (sigs.k8s.io/kwok), one KWOK process per node, and kube-scheduler, which
// binds the test's pods to them.
type Nodes struct {
	// Items are the nodes, in the order of their names.
	Items []*Node
	// Scheduler is the kube-scheduler of an isolated control plane, for a
	// test to stop, kill and start again; nil on the shared control plane,
	// whose scheduler serves every test of the package.
	Scheduler *Component

	// label is the value of the nodes' nodeLabel: the namespace of the
	// test that started them.
	label string
	plane *controlPlane
}

// Node is one fake node.
type Node struct {
	// Name is the Node object's name.
	Name string
	// Kubelet is the KWOK process that plays the node's kubelet. Stop or
	// Kill it and the node stops answering, as a node that lost its
	// network or power: its lease is no longer renewed, and after
	// [NodeMonitorGracePeriod] the node-lifecycle controller marks it
	// NotReady (Unknown) and its pods not ready; the taint-eviction
	// controller then evicts them after their toleration
	// ([DefaultTolerationSeconds] unless they say). Nothing completes a
	// deletion meanwhile: the pods stay in the API, Terminating or not,
	// for as long as the node does not answer, since they may still run.
	// Start it again and the node comes back: KWOK takes the lease over
	// once the old one expired (in up to 4 s), the node is Ready again,
	// its running pods ready again, and its terminating pods whose
	// deletionTimestamp passed are gone.
	Kubelet *Component
}

// nodeLabel is the label (and taint key) that ties a node to the namespace
// of the test that started it.
const nodeLabel = "testenv.groundskeeper.io/namespace"

// kwokLeaseSeconds is the duration of the lease that each KWOK process
// renews every quarter of it, as a kubelet does its node's lease.
const kwokLeaseSeconds = 4

// The stages by which KWOK moves the nodes and pods it manages (files in
// stages/, each saying why it is as it is).
var (
	//go:embed stages/node-initialize.yaml
	stageNodeInitialize string
	//go:embed stages/node-heartbeat.yaml
	stageNodeHeartbeat string
	//go:embed stages/pod-create.yaml
	stagePodCreate string
	//go:embed stages/pod-init-container-running.yaml
	stagePodInitRunning string
	//go:embed stages/pod-init-container-completed.yaml
	stagePodInitCompleted string
	//go:embed stages/pod-ready.yaml
	stagePodReady string
	//go:embed stages/pod-ready-again.yaml
	stagePodReadyAgain string
	//go:embed stages/pod-delete.yaml
	stagePodDelete string
)

// kwokStages is the --config file of every KWOK process.
func kwokStages() string {
	return strings.Join([]string{stageNodeInitialize, stageNodeHeartbeat, stagePodCreate, stagePodInitRunning,
		stagePodInitCompleted, stagePodReady, stagePodReadyAgain, stagePodDelete}, "\n---\n")
}

// StartNodes starts fake nodes for this test, and kube-scheduler in k's
// control plane if it does not run yet, and returns once every node is
// Ready. It is opt-in: a test that does not call it pays nothing, and its
// pods stay Pending as before.
//
// The pods of k.Namespace, created after StartNodes returns, are scheduled
// to these nodes and to no other test's: each node carries the label and
// the NoSchedule taint testenv.groundskeeper.io/namespace=<namespace>, and
// the namespace's annotations give its pods the matching node selector and
// toleration (the API server's PodNodeSelector and
// PodTolerationRestriction admission plugins). Pods of other namespaces
// never land on them.
//
// A pod on these nodes goes through its life as on a kubelet, moved by
// KWOK's stages: scheduled, then (in tenths of a second) Running and
// Ready; deleted, it stays Terminating, its volumes mounted, until its
// deletionTimestamp (its terminationGracePeriodSeconds, or the grace period
// of the delete; zero deletes at once), then it is gone. Stage files are in
// the package source (stages/*.yaml). See [Node.Kubelet] for a node that
// stops answering, and [Kubernetes.NewVolumePool] for claims that bind.
//
// KWOK plays a pod's stage once for each change of the pod, and forgets a
// request that failed for anything but a refused connection or an
// overload; a kubelet would send it again at its next sync. So, every 2 s,
// a pod on a node whose KWOK runs that KWOK left behind by more than 5 s
// (terminating past its deletionTimestamp, or scheduled and still Pending)
// gets the annotation [SyncAnnotation], which makes KWOK act on it again:
// a deleted pod goes even when KWOK's delete met an API server restart.
//
// The nodes are deleted when the test ends, after their KWOK processes
// stopped and the pods on them were removed.
func (k *Kubernetes) StartNodes(t testing.TB, o *NodeOptions) *Nodes {
	t.Helper()
	skipInShortMode(t)
	if k.plane == nil {
		t.Fatal("testenv: StartNodes needs a Kubernetes from StartKubernetes or StartIsolatedKubernetes")
	}
	count := 1
	if o != nil && o.Count != 0 {
		count = o.Count
	}
	if count < 0 {
		t.Fatalf("testenv: NodeOptions.Count is %d, want 1 or more", count)
	}
	kwokPath, err := binary("kwok")
	if err != nil {
		unavailable(t, err)
	}
	sched, err := k.plane.scheduler()
	if err != nil {
		unavailable(t, err)
	}
	ctx := context.Background()
	if err := k.admitToNodes(ctx, k.Namespace); err != nil {
		t.Fatalf("testenv: %v", err)
	}

	dir := t.TempDir()
	stages := filepath.Join(dir, "kwok-stages.yaml")
	if err := os.WriteFile(stages, []byte(kwokStages()), 0o644); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	base := uniqueName(t, 50)
	nodes := &Nodes{Scheduler: sched, label: k.Namespace, plane: k.plane}
	for i := range count {
		nodes.Items = append(nodes.Items, &Node{Name: fmt.Sprintf("%s-%d", base, i)})
	}
	// Registered before the KWOK processes, so that it runs after they
	// stopped: no kubelet, then no pod, then no node.
	t.Cleanup(func() { k.removeNodes(nodes) })
	for _, n := range nodes.Items {
		if _, err := k.Client.CoreV1().Nodes().Create(ctx, k.nodeObject(n.Name), metav1.CreateOptions{}); err != nil {
			t.Fatalf("testenv: create node %s: %v", n.Name, err)
		}
	}
	for _, n := range nodes.Items {
		n.Kubelet, err = startKWOK(t, kwokPath, dir, k.Kubeconfig, stages, n.Name)
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
	}
	if err := k.waitNodesReady(ctx, nodes); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	// Registered after the KWOK processes, so that it stops before them.
	t.Cleanup(startKubeletSync(k, nodes))
	return nodes
}

// UseNodes schedules the pods of k.Namespace, created after it returns, to
// nodes that another StartNodes started (a parent test's, typically), and
// to no other: many tests in namespaces of their own then share a few
// nodes, where nodes of their own would cost each a KWOK process per node.
// A test that stops a node's kubelet must not share its nodes.
func (k *Kubernetes) UseNodes(t testing.TB, nodes *Nodes) {
	t.Helper()
	skipInShortMode(t)
	if k.plane == nil || nodes == nil || nodes.plane != k.plane {
		t.Fatal("testenv: UseNodes needs nodes started by StartNodes in the same control plane")
	}
	if err := k.admitToNodes(context.Background(), nodes.label); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// admitToNodes sets the annotations of k.Namespace that give its pods the
// node selector and toleration of the nodes labelled label, and waits
// until the API server's admission applies them: the admission plugins
// read namespaces from a cache, and a pod admitted before the cache saw
// the annotations would be scheduled nowhere, for good.
func (k *Kubernetes) admitToNodes(ctx context.Context, label string) error {
	if k.Namespace == "" {
		return fmt.Errorf("nodes need the test's namespace (Kubernetes.Namespace is empty)")
	}
	tolerations, err := json.Marshal([]corev1.Toleration{{Key: nodeLabel, Operator: corev1.TolerationOpEqual, Value: label, Effect: corev1.TaintEffectNoSchedule}})
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		"scheduler.alpha.kubernetes.io/node-selector":      nodeLabel + "=" + label,
		"scheduler.alpha.kubernetes.io/defaultTolerations": string(tolerations),
	}}})
	if err != nil {
		return err
	}
	if _, err := k.Client.CoreV1().Namespaces().Patch(ctx, k.Namespace, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("annotate namespace %s for its nodes: %w", k.Namespace, err)
	}
	probe := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "testenv-admission-probe-"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "probe", Image: "probe"}}},
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := k.Client.CoreV1().Pods(k.Namespace).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		tolerates := slices.ContainsFunc(p.Spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == nodeLabel && t.Value == label })
		last = fmt.Sprintf("node selector %v, tolerations %v", p.Spec.NodeSelector, p.Spec.Tolerations)
		return p.Spec.NodeSelector[nodeLabel] == label && tolerates, nil
	})
	if err != nil {
		return fmt.Errorf("pods of namespace %s not admitted to its nodes within a minute (a dry-run pod got %s): %w", k.Namespace, last, err)
	}
	return nil
}

// nodeObject is the Node of the given name for k's namespace, for KWOK to
// manage.
func (k *Kubernetes) nodeObject(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				nodeLabel:                k.Namespace,
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
				// One zone per test: the node-lifecycle controller
				// decides on evictions zone by zone (a zone whose
				// nodes all fail is a network failure, not theirs), so
				// another test's nodes do not change this one's.
				"topology.kubernetes.io/zone": k.Namespace,
			},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: nodeLabel, Value: k.Namespace, Effect: corev1.TaintEffectNoSchedule}}},
	}
}

// waitNodesReady waits until every node is Ready and the node-lifecycle
// controller has lifted the not-ready taint the API server gives new
// nodes, so that the scheduler takes them.
func (k *Kubernetes) waitNodesReady(ctx context.Context, nodes *Nodes) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, n := range nodes.Items {
			node, err := k.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if !nodeReady(node) {
				last = fmt.Sprintf("node %s: conditions %v, taints %v", n.Name, node.Status.Conditions, node.Spec.Taints)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		log := ""
		if len(nodes.Items) > 0 && nodes.Items[0].Kubelet != nil {
			log = "; KWOK's log " + nodes.Items[0].Kubelet.LogPath()
		}
		return fmt.Errorf("nodes not ready within 2 minutes (%s)%s: %w", last, log, err)
	}
	return nil
}

// nodeReady reports whether node is Ready and without the taints of a node
// that is not.
func nodeReady(node *corev1.Node) bool {
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	for _, taint := range node.Spec.Taints {
		if taint.Key == corev1.TaintNodeNotReady || taint.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	return ready
}

// removeNodes removes, at the end of the test, the pods on the nodes
// (their kubelets are gone: nothing else would complete their deletion)
// and the nodes. The control plane may be down (a test of faults stopped
// it): errors are ignored.
func (k *Kubernetes) removeNodes(nodes *Nodes) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, n := range nodes.Items {
		pods, err := k.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
		if err == nil {
			for _, p := range pods.Items {
				_ = k.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
			}
		}
		_ = k.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
	}
}

// kwokSeq numbers the KWOK processes of the test binary, to give each its
// own range of pod IPs.
var (
	kwokMu  sync.Mutex
	kwokSeq int
)

// startKWOK starts the KWOK process that plays the kubelet of the node
// name, for the test t.
func startKWOK(t testing.TB, path, dir, kubeconfig, stages, name string) (*Component, error) {
	kwokMu.Lock()
	seq := kwokSeq
	kwokSeq++
	kwokMu.Unlock()
	cidr := fmt.Sprintf("10.%d.%d.0/24", 64+seq/256%64, seq%256)
	return onFreePorts(1, func(ports []int) (*Component, error) {
		addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
		return newComponent(t, &Component{
			name: "kwok-" + name, dir: dir, path: path,
			args: []string{
				"--kubeconfig=" + kubeconfig,
				"--config=" + stages,
				"--manage-single-node=" + name,
				fmt.Sprintf("--node-lease-duration-seconds=%d", kwokLeaseSeconds),
				"--server-address=" + addr,
				"--cidr=" + cidr,
			},
			ready: func(ctx context.Context) error { return httpOK(ctx, "http://"+addr+"/healthz") },
		})
	})
}

// schedulerArgs is the command line of kube-scheduler, serving its health
// on port, with its certificates in dir.
func schedulerArgs(kubeconfig, dir string, port int) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", port),
		"--cert-dir=" + filepath.Join(dir, "scheduler-certs"),
	}
}

// schedulerReady checks kube-scheduler's health endpoint, which it serves
// to anyone.
func schedulerReady(port int) func(context.Context) error {
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	return func(ctx context.Context) error { return httpOKWith(ctx, insecure, url, "") }
}

// startSharedScheduler starts the shared control plane's kube-scheduler,
// which lives as long as the test binary.
func startSharedScheduler(dir, kubeconfig string) (*process, error) {
	path, err := binary("kube-scheduler")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p, err := startProcess("kube-scheduler", dir, nil, path, schedulerArgs(kubeconfig, dir, port)...)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(90*time.Second, schedulerReady(port)); err != nil {
		return nil, err
	}
	return p, nil
}

// isolatedScheduler returns the scheduler function of an isolated control
// plane: it starts kube-scheduler once, as a Component of owner (the test
// that started the plane), on first use.
func isolatedScheduler(owner testing.TB, dir, kubeconfig string) func() (*Component, error) {
	var (
		mu    sync.Mutex
		sched *Component
	)
	return func() (*Component, error) {
		mu.Lock()
		defer mu.Unlock()
		if sched != nil {
			return sched, nil
		}
		path, err := binary("kube-scheduler")
		if err != nil {
			return nil, err
		}
		c, err := onFreePorts(1, func(ports []int) (*Component, error) {
			return newComponent(owner, &Component{
				name: "kube-scheduler", dir: dir, path: path,
				args:  schedulerArgs(kubeconfig, dir, ports[0]),
				ready: schedulerReady(ports[0]),
			})
		})
		if err != nil {
			return nil, err
		}
		sched = c
		return sched, nil
	}
}
