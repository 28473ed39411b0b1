package testenv

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// SyncAnnotation is the annotation by which the nodes' periodic sync
// makes KWOK act again on a pod it left behind (see [Nodes]). Its value
// is the time of the sync, RFC 3339.
const SyncAnnotation = "testenv.groundskeeper.io/kubelet-sync"

// Periods of the nodes' sync: how often it looks, and how late a pod must
// be before it is nudged (KWOK acts in tenths of a second; a loaded
// machine may take seconds).
const (
	syncEvery = 2 * time.Second
	syncLate  = 5 * time.Second
)

// kubeletSync stands in for a kubelet's periodic sync of its pods, which
// KWOK lacks. KWOK plays a pod's stage once for each event of the pod and
// retries only a request refused for a closed port or an overload; any
// other failure (a connection reset while the API server restarts, an
// etcd error passed on as a 500) is logged and forgotten until the pod
// changes. A deleted pod would then stay Terminating, its claims held,
// forever; a real kubelet sends its delete again at its next sync. So,
// every syncEvery until stop is closed, each pod on a node whose KWOK runs
// that KWOK left behind by more than syncLate (terminating past its
// deletionTimestamp, or scheduled and still Pending) gets SyncAnnotation:
// a change that makes KWOK play its stage again. The pods of a node that
// stopped answering are left alone.
func kubeletSync(k *Kubernetes, nodes *Nodes, stop <-chan struct{}) {
	tick := time.NewTicker(syncEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		for _, n := range nodes.Items {
			if n.Kubelet == nil || !n.Kubelet.Running() {
				continue
			}
			// client-go logs through the context's logger: a discarding one
			// keeps the sync off klog's global logger, which a test may set
			// while the sync runs (klog.SetLogger is not safe for concurrent
			// use).
			ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), logr.Discard()), syncEvery)
			syncNode(ctx, k, n.Name)
			cancel()
		}
	}
}

// syncNode nudges the pods of node that KWOK left behind. Errors are
// ignored: the control plane may be down (a test of faults), and the next
// sync tries again.
func syncNode(ctx context.Context, k *Kubernetes, node string) {
	pods, err := k.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return
	}
	now := time.Now()
	for i := range pods.Items {
		p := &pods.Items[i]
		if !leftBehind(p, now) {
			continue
		}
		// The UID makes the patch a precondition: a pod recreated under
		// the name is not touched.
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
			"uid":         p.UID,
			"annotations": map[string]string{SyncAnnotation: now.UTC().Format(time.RFC3339Nano)},
		}})
		if err != nil {
			return
		}
		_, _ = k.Client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
}

// leftBehind reports whether KWOK should have acted on p more than
// syncLate before now: removed it (terminating, no finalizers, past its
// deletionTimestamp) or started it (scheduled, still Pending).
func leftBehind(p *corev1.Pod, now time.Time) bool {
	if t := p.DeletionTimestamp; t != nil {
		return len(p.Finalizers) == 0 && now.Sub(t.Time) > syncLate
	}
	if p.Status.Phase != corev1.PodPending {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue {
			return now.Sub(c.LastTransitionTime.Time) > syncLate
		}
	}
	return false
}

// startKubeletSync runs kubeletSync for nodes until the returned function
// is called; it returns once the sync stopped.
func startKubeletSync(k *Kubernetes, nodes *Nodes) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { kubeletSync(k, nodes, done) })
	var once sync.Once
	return func() {
		once.Do(func() { close(done) })
		wg.Wait()
	}
}
