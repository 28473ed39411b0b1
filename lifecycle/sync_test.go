package lifecycle_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

// client-go's recorder is accepted as is.
var _ lifecycle.EventRecorder = record.EventRecorder(nil)

func createOwner(t *testing.T, env *testenv.Kubernetes, name string) lifecycle.Ref {
	t.Helper()
	cm := must[*corev1.ConfigMap](t)(env.Client.CoreV1().ConfigMaps(env.Namespace).Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}))
	return lifecycle.Ref{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}
}

func ownerReference(r lifecycle.Ref, controller bool) metav1.OwnerReference {
	ref := metav1.OwnerReference{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: r.UID}
	if controller {
		ref.Controller, ref.BlockOwnerDeletion = ptr.To(true), ptr.To(true)
	}
	return ref
}

// A claim that changes between our read and our patch is read again: the
// other writer's change survives, and ours is applied on top of it.
func TestSyncClaimRetriesConflictsFromAFreshRead(t *testing.T) {
	t.Parallel()
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	claims := env.Client.CoreV1().PersistentVolumeClaims(env.Namespace)
	owner := createOwner(t, env, "db")
	// The other writer adds a reference to an object that exists, so that
	// the garbage collector has no reason to touch the claim.
	other := createOwner(t, env, "other")
	must[*corev1.PersistentVolumeClaim](t)(claims.Create(ctx, newClaim("data-db-0", "db", nil), metav1.CreateOptions{}))
	hooks := &hookClient{Client: lifecycle.ClientGo(env.Client.CoreV1())}
	var once sync.Once
	hooks.beforePatch = func(ctx context.Context, name string) {
		once.Do(func() {
			// Someone else writes first: our patch carries a stale resourceVersion.
			patch := `{"metadata":{"labels":{"note":"theirs"},"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"other","uid":"` + string(other.UID) + `"}]}}`
			_, err := claims.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			if err != nil {
				t.Error(err)
			}
		})
	}
	m := must[*lifecycle.Manager](t)(lifecycle.New(lifecycle.Config{Client: hooks}))
	policy := must[lifecycle.Policy](t)(lifecycle.DeleteOnScaledownAndOwnerDeletion.Policy())
	plan, err := m.SyncClaim(ctx, env.Namespace, lifecycle.Ownership{Policy: policy, Owner: owner}, "data-db-0", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if hooks.patches != 2 || plan.Status != lifecycle.PlanUpdate {
		t.Errorf("patches = %d, status %s; want 2 (one conflict), Update", hooks.patches, plan.Status)
	}
	got := must[*corev1.PersistentVolumeClaim](t)(claims.Get(ctx, "data-db-0", metav1.GetOptions{}))
	if got.Labels["note"] != "theirs" || len(got.OwnerReferences) != 2 || got.OwnerReferences[0].UID != other.UID ||
		got.OwnerReferences[1].UID != owner.UID || !ptr.Deref(got.OwnerReferences[1].Controller, false) {
		t.Errorf("claim after retry: labels %v, owners %+v", got.Labels, got.OwnerReferences)
	}
	// A second sync has nothing to do: no request that writes.
	before := hooks.patches
	if plan, err := m.SyncClaim(ctx, env.Namespace, lifecycle.Ownership{Policy: policy, Owner: owner}, "data-db-0", nil, nil); err != nil || plan.Changed || hooks.patches != before {
		t.Errorf("second sync: %+v %v, patches %d -> %d", plan, err, before, hooks.patches)
	}
}

// Another controller on the claim: our references go, nothing is added, the
// caller gets a *ConflictError and the owner a ConflictingController event
// through client-go's real event recorder. A stale reference leaves the claim
// untouched.
func TestSyncClaimConflictingControllerAndStaleReference(t *testing.T) {
	t.Parallel()
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	ns := env.Namespace
	claims := env.Client.CoreV1().PersistentVolumeClaims(ns)
	owner := createOwner(t, env, "db")
	other := createOwner(t, env, "someone-else")

	broadcaster := record.NewBroadcaster()
	defer broadcaster.Shutdown()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: env.Client.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "lifecycle-test"})
	var mu sync.Mutex
	var seen []string
	hooks := &hookClient{Client: lifecycle.ClientGo(env.Client.CoreV1())}
	m := must[*lifecycle.Manager](t)(lifecycle.New(lifecycle.Config{Client: hooks,
		Recorder: lifecycle.EventFunc(func(obj runtime.Object, typ, reason, msg string) {
			mu.Lock()
			seen = append(seen, typ+" "+reason)
			mu.Unlock()
			recorder.Event(obj, typ, reason, msg)
		})}))
	policy := must[lifecycle.Policy](t)(lifecycle.DeleteOnOwnerDeletionOnly.Policy())

	c := newClaim("data-db-0", "db", nil)
	c.OwnerReferences = []metav1.OwnerReference{ownerReference(owner, false), ownerReference(other, true)}
	must[*corev1.PersistentVolumeClaim](t)(claims.Create(ctx, c, metav1.CreateOptions{}))
	plan, err := m.SyncClaim(ctx, ns, lifecycle.Ownership{Policy: policy, Owner: owner}, c.Name, nil, nil)
	var ce *lifecycle.ConflictError
	if !errors.Is(err, lifecycle.ErrConflictingController) || !errors.As(err, &ce) || ce.Controller.UID != other.UID {
		t.Fatalf("err = %v, want a ConflictError naming %s", err, other.Name)
	}
	if plan.Status != lifecycle.PlanConflict {
		t.Errorf("status %s", plan.Status)
	}
	got := must[*corev1.PersistentVolumeClaim](t)(claims.Get(ctx, c.Name, metav1.GetOptions{}))
	if len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != other.UID {
		t.Errorf("owner references %+v, want only the other controller's", got.OwnerReferences)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		evs, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == lifecycle.ReasonConflictingController && e.Type == corev1.EventTypeWarning &&
				e.InvolvedObject.Kind == "ConfigMap" && e.InvolvedObject.Name == owner.Name && strings.Contains(e.Message, c.Name) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Errorf("no ConflictingController event on the owner: %v (recorded %v)", err, seen)
	}

	// Stale: the claim refers to an earlier owner named "db" (the garbage
	// collector deletes such a claim soon: it may win the race, but we must
	// never write to it).
	stale := newClaim("data-db-1", "db", nil)
	earlier := owner
	earlier.UID = "uid-of-an-earlier-db"
	stale.OwnerReferences = []metav1.OwnerReference{ownerReference(earlier, true)}
	stale = must[*corev1.PersistentVolumeClaim](t)(claims.Create(ctx, stale, metav1.CreateOptions{}))
	patches := hooks.patches
	plan, err = m.SyncClaim(ctx, ns, lifecycle.Ownership{Policy: policy, Owner: owner}, stale.Name, stale, nil)
	if !errors.Is(err, lifecycle.ErrStaleOwnerReference) || plan.Status != lifecycle.PlanStale || plan.Found.UID != earlier.UID {
		t.Fatalf("stale: %v, %s", err, plan.Status)
	}
	if hooks.patches != patches {
		t.Errorf("a claim with a stale reference was patched")
	}
}
