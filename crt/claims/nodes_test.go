package claims_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/crt/claims"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// Sets on a manager, on fake nodes: pods run, and the scale-down's
// pod terminates for its grace period. While it does, SyncSet (pods and
// claims from the manager's cache) neither deletes another pod nor touches
// its claim, and a collector pass on the cache keeps the claim despite an
// expired mark; the claim goes (whenScaled: Delete) only once the pod is
// gone.
func TestSetsOnNodes(t *testing.T) {
	t.Parallel()
	env := testenv.StartKubernetes(t)
	env.StartNodes(t, nil)
	pool := env.NewVolumePool(t, &testenv.VolumeOptions{Count: 4})
	mgr := startManager(t, env)
	ctx := t.Context()
	c := mgr.GetClient()
	sets, m := configMapSets(t, mgr)
	const grace = 8
	sync := func(cm *corev1.ConfigMap) (lifecycle.SetResult, error) {
		set, err := sets.For(cm)
		if err != nil {
			return lifecycle.SetResult{}, err
		}
		set.Pod = func(i int) (*corev1.Pod, error) {
			p := pod("", "data-db-"+strconv.Itoa(i))
			p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](grace)
			return p, nil
		}
		set.Claims = func(i int) ([]*corev1.PersistentVolumeClaim, error) {
			cl := claim("data-db-"+strconv.Itoa(i), m.Annotations().Track("db-"+strconv.Itoa(i), time.Hour))
			cl.Spec.StorageClassName = &pool.StorageClass
			return []*corev1.PersistentVolumeClaim{cl}, nil
		}
		return m.SyncSet(ctx, set, nil)
	}
	getPod := func(name string) *corev1.Pod {
		var p corev1.Pod
		err := mgr.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: name}, &p)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			t.Fatal(err)
		}
		return &p
	}
	until := func(what string, done func() bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) { return done(), nil })
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: "db"}, Data: map[string]string{"replicas": "2"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	until("two pods Running", func() bool {
		if _, err := sync(cm); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		for _, name := range []string{"db-0", "db-1"} {
			if p := getPod(name); p == nil || p.Status.Phase != corev1.PodRunning {
				return false
			}
		}
		return true
	})

	cm.Data["replicas"] = "1"
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	// Terminating in the API server and in the manager's cache, which
	// SyncSet reads: a pass on a cache that has not seen the deletion yet
	// deletes the pod again (a no-op with its UID precondition).
	until("db-1 terminating, in the cache too", func() bool {
		if _, err := sync(cm); err != nil {
			t.Fatal(err)
		}
		p := getPod("db-1")
		var cached corev1.Pod
		err := c.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "db-1"}, &cached)
		return p != nil && p.DeletionTimestamp != nil && err == nil && cached.UID == p.UID && cached.DeletionTimestamp != nil
	})
	// While db-1 terminates: more passes, and a collector on the cache
	// with an expired mark on its claim.
	for range 3 {
		if res, err := sync(cm); err != nil || len(res.Actions) != 0 {
			t.Fatalf("SyncSet while the condemned pod terminates: actions %+v, %v; want none", res.Actions, err)
		}
	}
	var claim1 corev1.PersistentVolumeClaim
	if err := c.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "data-db-1"}, &claim1); err != nil {
		t.Fatal(err)
	}
	claim1.Annotations[m.Annotations().LastUnmountedKey()] = time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
	if err := c.Update(ctx, &claim1); err != nil {
		t.Fatal(err)
	}
	scope := lifecycle.Scope{Namespace: env.Namespace, Claims: claims.Cache(mgr.GetCache()), Pods: claims.PodCache(mgr.GetCache())}
	until("the cache sees the mark", func() bool {
		var cl corev1.PersistentVolumeClaim
		return c.Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "data-db-1"}, &cl) == nil && cl.Annotations[m.Annotations().LastUnmountedKey()] != ""
	})
	res, err := m.Collect(ctx, lifecycle.CollectOptions{Scope: scope})
	if err != nil || len(res.Deleted) != 0 {
		t.Fatalf("Collect while the pod that mounts the claim terminates: deleted %+v, %v; want none", res.Deleted, err)
	}
	if p := getPod("db-1"); p == nil || p.DeletionTimestamp == nil {
		t.Fatal("db-1 was gone before the checks during its termination ended: the machine is too slow for its grace period")
	}
	if err := mgr.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "data-db-1"}, &claim1); err != nil || claim1.DeletionTimestamp != nil {
		t.Fatalf("claim of the terminating pod: %v, deletionTimestamp %v; want it kept", err, claim1.DeletionTimestamp)
	}

	until("db-1 gone, then its claim", func() bool {
		var cl corev1.PersistentVolumeClaim
		return getPod("db-1") == nil && apierrors.IsNotFound(mgr.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "data-db-1"}, &cl))
	})
	if p := getPod("db-0"); p == nil || p.DeletionTimestamp != nil {
		t.Errorf("db-0 after the scale-down: %v; want it running", p)
	}
}

// UnmountTracker on fake nodes: a pod deleted with a grace period keeps its
// claim unmarked while it terminates (the event that marks is the pod's
// removal, and the mark is decided on a fresh pod list); once the pod is
// gone the claim is marked, from then, so its TTL counts from when the pod
// really went.
func TestUnmountTrackerOnNodes(t *testing.T) {
	t.Parallel()
	env := testenv.StartKubernetes(t)
	env.StartNodes(t, nil)
	pool := env.NewVolumePool(t, &testenv.VolumeOptions{Count: 1})
	ctx := t.Context()
	ns := env.Namespace
	mgr := env.NewManager(t, scheme.Scheme)
	client := claims.Client(mgr.GetClient(), mgr.GetAPIReader())
	lc, err := lifecycle.New(lifecycle.Config{Client: client})
	if err != nil {
		t.Fatal(err)
	}
	scope := lifecycle.Scope{Namespace: ns, Claims: claims.Cache(mgr.GetClient()), Pods: claims.PodCache(mgr.GetClient())}
	if err := (claims.UnmountTracker{Name: "unmounts", Lifecycle: lc, Claims: client, Scope: scope}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	testenv.StartManager(t, mgr)

	cl := claim("data-0", lc.Annotations().Track("db-0", time.Hour))
	cl.Spec.StorageClassName = &pool.StorageClass
	if _, err := env.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, cl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := pod("db-0", "data-0")
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
	if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mark := func() string {
		c, err := env.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c.Annotations[lc.Annotations().LastUnmountedKey()]
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		t.Fatalf("pod db-0 not Running: %v", err)
	}
	if err := env.Client.CoreV1().Pods(ns).Delete(ctx, "db-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var deadline time.Time
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		// The claim first, then the pod: a mark read before a pod that is
		// still there was written while the pod was there (in the other
		// order, the pod could go, and the claim be marked, between the
		// two reads).
		m := mark()
		p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		deadline = p.DeletionTimestamp.Time
		if m != "" {
			t.Fatalf("claim marked unmounted at %s while its pod terminates (until %s)", m, deadline)
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod db-0 not gone: %v", err)
	}
	var since time.Time
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		m := mark()
		if m == "" {
			return false, nil
		}
		since, err = time.Parse(time.RFC3339, m)
		return true, err
	})
	if err != nil {
		t.Fatalf("claim never marked unmounted once its pod was gone: %v", err)
	}
	// RFC 3339 in seconds: the mark is no earlier than the second the pod
	// went.
	if since.Before(deadline.Truncate(time.Second).Add(-time.Second)) {
		t.Errorf("claim marked unmounted since %s, before its pod went (deletionTimestamp %s)", since, deadline)
	}
}
