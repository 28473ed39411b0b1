package testenv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// podWith is a pod with one container and, for each claim, a volume.
func podWith(name string, grace int64, claims ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To(grace),
			Containers:                    []corev1.Container{{Name: "db", Image: "registry.example/db:1"}},
		},
	}
	for i, c := range claims {
		vol := fmt.Sprintf("data-%d", i)
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: "/" + vol})
	}
	return p
}

// waitPod polls the pod until done says so, and fails the test after
// timeout with the last state seen. A pod that is gone is passed as nil.
func waitPod(t *testing.T, k *testenv.Kubernetes, name string, timeout time.Duration, what string, done func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := k.Client.CoreV1().Pods(k.Namespace).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			last = nil
			return done(nil), nil
		}
		if err != nil {
			return false, err
		}
		last = p
		return done(p), nil
	})
	if err != nil {
		state := "gone"
		if last != nil {
			state = fmt.Sprintf("node %q, phase %s, conditions %v, deletionTimestamp %v", last.Spec.NodeName, last.Status.Phase, last.Status.Conditions, last.DeletionTimestamp)
		}
		t.Fatalf("pod %s: not %s within %s (%s): %v", name, what, timeout, state, err)
	}
	return last
}

func running(p *corev1.Pod) bool {
	if p == nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func gone(p *corev1.Pod) bool { return p == nil }

// The package's example (example_nodes_test.go) runs.
func TestExampleNodes(t *testing.T) {
	t.Parallel()
	podBecomesRunning(t)
}

// A pod is scheduled to the test's node and becomes Running and Ready;
// deleted, it stays Terminating until its deletionTimestamp (its grace
// period), then it is gone.
func TestPodRunsOnNodeAndTakesItsGracePeriodToDie(t *testing.T) {
	t.Parallel()
	k := testenv.StartKubernetes(t)
	nodes := k.StartNodes(t, nil)
	if len(nodes.Items) != 1 || nodes.Scheduler != nil {
		t.Fatalf("StartNodes(nil) = %d nodes, scheduler %v; want 1 node and no scheduler component on the shared plane", len(nodes.Items), nodes.Scheduler)
	}
	pods := k.Client.CoreV1().Pods(k.Namespace)
	if _, err := pods.Create(t.Context(), podWith("db-0", 30), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, k, "db-0", time.Minute, "Running and Ready", running)
	if p.Spec.NodeName != nodes.Items[0].Name {
		t.Errorf("pod runs on %q, want the test's node %q", p.Spec.NodeName, nodes.Items[0].Name)
	}

	const grace = 3
	if err := pods.Delete(t.Context(), "db-0", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](grace)}); err != nil {
		t.Fatal(err)
	}
	p, err := pods.Get(t.Context(), "db-0", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("pod right after its graceful deletion: %v; want it Terminating", err)
	}
	deadline := p.DeletionTimestamp.Time
	var lastSeen time.Time
	waitPod(t, k, "db-0", time.Minute, "gone", func(p *corev1.Pod) bool {
		if p != nil {
			lastSeen = time.Now()
		}
		return p == nil
	})
	// Timestamps have one-second precision: the pod was still there a
	// moment before its deletionTimestamp.
	if lastSeen.Before(deadline.Add(-time.Second)) {
		t.Errorf("pod last seen at %s, gone before its deletionTimestamp %s", lastSeen.Format(time.StampMilli), deadline.Format(time.StampMilli))
	}
}

// Pods of a namespace without nodes stay Pending, even while another
// test's nodes run: nodes take only their own test's pods, and those of
// the namespaces that UseNodes gives them.
func TestNodesTakeOnlyTheirTestsPods(t *testing.T) {
	t.Parallel()
	with := testenv.StartKubernetes(t)
	nodes := with.StartNodes(t, nil)
	sharing := testenv.StartKubernetes(t)
	sharing.UseNodes(t, nodes)
	if _, err := sharing.Client.CoreV1().Pods(sharing.Namespace).Create(t.Context(), podWith("guest", 30), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := waitPod(t, sharing, "guest", time.Minute, "Running", running); p.Spec.NodeName != nodes.Items[0].Name {
		t.Errorf("pod of the namespace that uses the nodes runs on %q, want %q", p.Spec.NodeName, nodes.Items[0].Name)
	}
	without := testenv.StartKubernetes(t)
	if _, err := without.Client.CoreV1().Pods(without.Namespace).Create(t.Context(), podWith("stray", 30), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := with.Client.CoreV1().Pods(with.Namespace).Create(t.Context(), podWith("mine", 30), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, with, "mine", time.Minute, "Running", running)
	// The scheduler looked at the stray pod and found no node for it.
	p := waitPod(t, without, "stray", time.Minute, "found unschedulable", func(p *corev1.Pod) bool {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return true
			}
		}
		return false
	})
	if p.Spec.NodeName != "" {
		t.Errorf("pod of a namespace without nodes runs on %s", p.Spec.NodeName)
	}
}

// A claim of a WaitForFirstConsumer class binds when its first pod is
// scheduled; the pod runs with it. Deleted, the claim's volume is Released.
func TestClaimBindsWhenItsPodIsScheduled(t *testing.T) {
	t.Parallel()
	k := testenv.StartKubernetes(t)
	k.StartNodes(t, nil)
	pool := k.NewVolumePool(t, &testenv.VolumeOptions{Count: 2})
	claims := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace)
	c := claim("data-db-0")
	c.Spec.StorageClassName = &pool.StorageClass
	if _, err := claims.Create(t.Context(), c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No pod yet: the claim waits for one.
	if got, err := claims.Get(t.Context(), "data-db-0", metav1.GetOptions{}); err != nil || got.Status.Phase != corev1.ClaimPending {
		t.Fatalf("claim before its pod: %v, %v; want Pending", got.Status.Phase, err)
	}
	if _, err := k.Client.CoreV1().Pods(k.Namespace).Create(t.Context(), podWith("db-0", 30, "data-db-0"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, k, "db-0", time.Minute, "Running", running)
	got, err := claims.Get(t.Context(), "data-db-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != corev1.ClaimBound || got.Spec.VolumeName == "" {
		t.Fatalf("claim of a running pod: phase %s, volume %q; want Bound to a volume of the pool", got.Status.Phase, got.Spec.VolumeName)
	}
	if q := got.Status.Capacity[corev1.ResourceStorage]; q.Cmp(resource.MustParse("10Gi")) != 0 {
		t.Errorf("bound claim's capacity %s, want the volume's 10Gi", q.String())
	}
}

// waitNode polls the node until done says so.
func waitNode(t *testing.T, k *testenv.Kubernetes, name string, timeout time.Duration, what string, done func(*corev1.Node) bool) {
	t.Helper()
	var last *corev1.Node
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := k.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = n
		return done(n), nil
	})
	if err != nil {
		t.Fatalf("node %s: not %s within %s (conditions %v, taints %v): %v", name, what, timeout, last.Status.Conditions, last.Spec.Taints, err)
	}
}

func nodeCondition(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

func podCondition(p *corev1.Pod, typ corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

// on pins a pod to a node.
func on(p *corev1.Pod, node string) *corev1.Pod {
	p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node}
	return p
}

// A node whose kubelet stops answering goes NotReady (Unknown); its pod is
// marked not ready, then evicted, and stays Terminating, past its
// deletionTimestamp, for as long as the node does not answer: it may still
// run. When the node answers again, the pod goes.
func TestNodeStopsAnsweringAndComesBack(t *testing.T) {
	t.Parallel()
	k := testenv.StartKubernetes(t)
	// Two nodes: when every node of a zone fails, the node-lifecycle
	// controller blames the network and evicts nothing.
	nodes := k.StartNodes(t, &testenv.NodeOptions{Count: 2})
	failing, healthy := nodes.Items[0], nodes.Items[1]
	pods := k.Client.CoreV1().Pods(k.Namespace)
	if _, err := pods.Create(t.Context(), on(podWith("db-0", 1), failing.Name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, k, "db-0", time.Minute, "Running", running)

	if err := failing.Kubelet.Kill(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	waitNode(t, k, failing.Name, time.Minute, "Unknown", func(n *corev1.Node) bool { return nodeCondition(n) == corev1.ConditionUnknown })
	t.Logf("node Unknown after %s", time.Since(start).Round(time.Second))
	waitPod(t, k, "db-0", time.Minute, "marked not ready", func(p *corev1.Pod) bool {
		return p != nil && p.Status.Phase == corev1.PodRunning && podCondition(p, corev1.PodReady) == corev1.ConditionFalse
	})
	t.Logf("pod not ready after %s", time.Since(start).Round(time.Second))
	evicted := waitPod(t, k, "db-0", 2*time.Minute, "evicted", func(p *corev1.Pod) bool { return p != nil && p.DeletionTimestamp != nil })
	t.Logf("pod evicted after %s, deletionTimestamp %s", time.Since(start).Round(time.Second), evicted.DeletionTimestamp.Format(time.StampMilli))

	// A pod deleted later on the healthy node is gone once its own (later)
	// deletionTimestamp passed: time enough for the evicted one's.
	if _, err := pods.Create(t.Context(), on(podWith("witness", 1), healthy.Name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, k, "witness", time.Minute, "Running", running)
	if err := pods.Delete(t.Context(), "witness", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, k, "witness", time.Minute, "gone", gone)
	p, err := pods.Get(t.Context(), "db-0", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the evicted pod of the node that does not answer: %v; want it still Terminating (it may run)", err)
	}
	if !p.DeletionTimestamp.Equal(evicted.DeletionTimestamp) {
		t.Errorf("evicted pod's deletionTimestamp changed from %s to %s", evicted.DeletionTimestamp, p.DeletionTimestamp)
	}

	if err := failing.Kubelet.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitNode(t, k, failing.Name, time.Minute, "Ready again", func(n *corev1.Node) bool { return nodeCondition(n) == corev1.ConditionTrue })
	waitPod(t, k, "db-0", time.Minute, "gone once its node answers", gone)
}
