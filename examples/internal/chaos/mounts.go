package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Mount is one pod that had a volume for a claim, as the workload that
// created and deleted the pod recorded it. A pod whose spec.volumes names
// the claim is what mounting means, to lifecycle and to Kubernetes alike;
// on a node (testenv.Kubernetes.StartNodes) a deleted pod goes on running,
// its claim mounted, until it is gone from the API: its grace period, or
// for as long as its node does not answer.
type Mount struct {
	Pod, Claim string
	// UID is the pod's, when its create's answer said (CreatePod).
	UID types.UID
	// Foreign means the system under test did not make the pod (a debug or
	// backup pod that mounts a claim for a while).
	Foreign bool
	// From is when the pod's create returned: it existed by then. To is
	// when its delete was sent, zero while it was not: it existed until
	// then at least.
	From, To time.Time
	// Seen is the last instant the pod, its delete sent, was known to
	// exist still (a list sent then found it; see Track): it mounted the
	// claim until then at least.
	Seen time.Time
}

// end is the latest instant the pod is known to have mounted the claim,
// zero while its delete was not sent.
func (m Mount) end() time.Time {
	if m.To.IsZero() || m.Seen.Before(m.To) {
		return m.To
	}
	return m.Seen
}

func (m Mount) String() string {
	to := "still there"
	if !m.To.IsZero() {
		to = "its delete sent " + m.To.Format("15:04:05.000")
	}
	if m.Seen.After(m.To) {
		to += ", still there at " + m.Seen.Format("15:04:05.000")
	}
	return fmt.Sprintf("pod %s (created by %s, %s)", m.Pod, m.From.Format("15:04:05.000"), to)
}

// MountLog records the mounts of a workload's pods so that a checker can
// tell whether a claim was deleted while a pod mounted it. It is safe for
// concurrent use; the zero value is ready.
type MountLog struct {
	mu     sync.Mutex
	mounts []*Mount
}

// Mounted records that pod, which mounts claim, was created by at (its
// create returned). The mount has no UID: Track cannot follow the pod past
// its delete, so it ends when the delete was sent, which is right only
// where a deleted pod is gone at once (no nodes). CreatePod records both.
func (l *MountLog) Mounted(pod, claim string, foreign bool, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mounts = append(l.mounts, &Mount{Pod: pod, Claim: claim, Foreign: foreign, From: at})
}

// Unmounting records that the delete of pod is about to be sent, at at:
// call it before the request, since the deletion may be seen before the
// answer comes.
func (l *MountLog) Unmounting(pod string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.mounts {
		if m.Pod == pod && m.To.IsZero() {
			m.To = at
		}
	}
}

// CreatePod creates pod, which mounts claim, through faults (Retry; a pod
// already there counts as created), then records the mount from when its
// create returned, with the pod's UID, and returns it. An earlier pod of
// the name that is still terminating (on a node) is waited for, for up to
// two minutes, as a StatefulSet waits before it makes the pod again. The
// UID tells the pod from one recreated under its name, and lets Track
// follow it until it is gone.
func (l *MountLog) CreatePod(pods corev1client.PodInterface, pod *corev1.Pod, claim string, foreign bool) (Mount, error) {
	var uid types.UID
	deadline := time.Now().Add(2 * time.Minute)
	for {
		terminating := false
		err := Retry(func(ctx context.Context) error {
			got, err := pods.Create(ctx, pod, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				got, err = pods.Get(ctx, pod.Name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return err // gone meanwhile: create it
				}
			}
			if err != nil {
				return err
			}
			uid, terminating = got.UID, got.DeletionTimestamp != nil
			return nil
		})
		if err != nil {
			return Mount{}, fmt.Errorf("create pod %s: %w", pod.Name, err)
		}
		if !terminating {
			break
		}
		if time.Now().After(deadline) {
			return Mount{}, fmt.Errorf("create pod %s: an earlier pod of the name still terminating after two minutes", pod.Name)
		}
		time.Sleep(200 * time.Millisecond)
	}
	m := &Mount{Pod: pod.Name, Claim: claim, UID: uid, Foreign: foreign, From: time.Now()}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mounts = append(l.mounts, m)
	return *m, nil
}

// Track lists the pods every interval until ctx ends, and records on each
// mount whose delete was sent that its pod (by UID) was still there when
// the list was sent (Mount.Seen): on nodes a deleted pod runs, its claim
// mounted, until it is gone. Lists that fail (faults) are skipped; pods
// should be a connection without faults.
func (l *MountLog) Track(ctx context.Context, pods corev1client.PodInterface, interval time.Duration) {
	for {
		sent := time.Now()
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err == nil {
			there := map[types.UID]bool{}
			for _, p := range list.Items {
				there[p.UID] = true
			}
			l.mu.Lock()
			for _, m := range l.mounts {
				if !m.To.IsZero() && m.UID != "" && there[m.UID] && sent.After(m.Seen) {
					m.Seen = sent
				}
			}
			l.mu.Unlock()
		}
		if Sleep(ctx, interval) != nil {
			return
		}
	}
}

// DeletePod records that the delete of pod is being sent at now (see
// Unmounting), then deletes it through faults (Retry); a pod already gone
// counts as deleted.
func (l *MountLog) DeletePod(pods corev1client.PodInterface, pod string, now time.Time) error {
	l.Unmounting(pod, now)
	err := Retry(func(ctx context.Context) error {
		err := pods.Delete(ctx, pod, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("delete pod %s: %w", pod, err)
	}
	return nil
}

// Mounts returns a copy of the mounts recorded, in the order created.
func (l *MountLog) Mounts() []Mount {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Mount, len(l.mounts))
	for i, m := range l.mounts {
		out[i] = *m
	}
	return out
}

// Covering returns a mount of claim during which a deletion known to have
// happened at some instant of [lo, hi] certainly happened, and that had
// begun race before lo: a deletion decided on a fresh pod list taken just
// before the pod was created, and slowed on its way (a connection held for
// seconds, an API server restart), may reach the API server while the pod
// exists, and no precondition can prevent that (creating a pod does not
// change the claim). race is that bound: 0 judges every overlap. ok is
// false when no mount covers the deletion.
func (l *MountLog) Covering(claim string, lo, hi time.Time, race time.Duration) (m Mount, ok bool) {
	if lo.IsZero() || hi.Before(lo) {
		return Mount{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, m := range l.mounts {
		if m.Claim == claim && !lo.Before(m.From.Add(race)) && (m.To.IsZero() || hi.Before(m.end())) {
			return *m, true
		}
	}
	return Mount{}, false
}
