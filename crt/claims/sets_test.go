package claims_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/crt/claims"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// configMapSets is Sets over ConfigMaps that stand for the
// custom resource (data.replicas, whenScaled: Delete), on mgr, and the
// lifecycle Manager that syncs their sets through mgr's clients.
func configMapSets(t *testing.T, mgr ctrl.Manager) (claims.Sets[*corev1.ConfigMap], *lifecycle.Manager) {
	t.Helper()
	c := mgr.GetClient()
	sets := claims.Sets[*corev1.ConfigMap]{Client: c, APIReader: mgr.GetAPIReader(), GVK: corev1.SchemeGroupVersion.WithKind("ConfigMap"), Label: "app",
		Spec: func(cm *corev1.ConfigMap) (int, lifecycle.Policy, error) {
			n, err := strconv.Atoi(cm.Data["replicas"])
			return n, lifecycle.Policy{WhenScaled: lifecycle.ActionDelete}, err
		}}
	m, err := lifecycle.New(lifecycle.Config{Client: claims.Client(c, mgr.GetAPIReader())})
	if err != nil {
		t.Fatal(err)
	}
	return sets, m
}

// Sets on a started manager: the owner's state from the object, the
// fresh read through the API reader, pods and claims from the cache, and
// the writes of lifecycle.Client through the manager's client. A ConfigMap
// stands for the custom resource (data.replicas).
func TestSetsOnAManager(t *testing.T) {
	env := testenv.StartKubernetes(t)
	mgr := startManager(t, env)
	ctx := t.Context()
	c := mgr.GetClient()
	sets, m := configMapSets(t, mgr)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: env.Namespace, Name: "db"}, Data: map[string]string{"replicas": "2"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	sync := func(obj *corev1.ConfigMap) (lifecycle.SetResult, error) {
		set, err := sets.For(obj)
		if err != nil {
			return lifecycle.SetResult{}, err
		}
		set.Pod = func(i int) (*corev1.Pod, error) { return pod("", "data-db-"+strconv.Itoa(i)), nil }
		set.Claims = func(i int) ([]*corev1.PersistentVolumeClaim, error) {
			return []*corev1.PersistentVolumeClaim{claim("data-db-"+strconv.Itoa(i), nil)}, nil
		}
		return m.SyncSet(ctx, set, nil)
	}
	until := func(what string, obj *corev1.ConfigMap, done func(lifecycle.SetResult) bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			res, err := sync(obj)
			if apierrors.IsAlreadyExists(err) {
				return false, nil // the cache had not seen our last create yet
			}
			return err == nil && done(res), err
		})
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	until("create", cm, func(r lifecycle.SetResult) bool { return r.Ready == 2 })

	set, err := sets.For(cm)
	if err != nil {
		t.Fatal(err)
	}
	if set.Owner.Ref.Kind != "ConfigMap" || set.Owner.Ref.UID != cm.UID || set.Owner.Version != cm.ResourceVersion || set.Owner.Replicas != 2 {
		t.Errorf("For: owner %+v; want ConfigMap db (uid %s) at version %s with 2 replicas", set.Owner, cm.UID, cm.ResourceVersion)
	}

	// A scale-down the API server no longer shows deletes nothing.
	stale := cm.DeepCopy()
	stale.Data["replicas"] = "1"
	res, err := sync(stale)
	if err != nil {
		t.Fatal(err)
	}
	var pods corev1.PodList
	if err := mgr.GetAPIReader().List(ctx, &pods, client.InNamespace(env.Namespace)); err != nil || len(pods.Items) != 2 {
		t.Fatalf("a scale-down read only in a stale object deleted a pod: %d pods (%v), actions %+v", len(pods.Items), err, res.Actions)
	}

	// Scaled for real: pod db-1 goes, and its claim with it (whenScaled: Delete).
	cm.Data["replicas"] = "1"
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	until("scale-down", cm, func(r lifecycle.SetResult) bool {
		var p corev1.Pod
		return apierrors.IsNotFound(mgr.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: env.Namespace, Name: "db-1"}, &p))
	})

	// Reread of an owner that is gone: nil, not an error.
	if err := c.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if now, err := set.Reread(ctx); err != nil || now != nil {
		t.Errorf("Reread of a deleted owner = %+v, %v; want nil, nil", now, err)
	}
}

// Requests leads a claim back to its owner: by a controller reference of the
// owner's group and kind, else by the label.
func TestSetsRequests(t *testing.T) {
	sets := claims.Sets[*corev1.ConfigMap]{GVK: schema.GroupVersionKind{Group: "db.example", Version: "v1", Kind: "DB"}, Label: "db.example/name"}
	yes := true
	for _, tc := range []struct {
		name   string
		labels map[string]string
		ctl    *metav1.OwnerReference
		want   string
	}{
		{"controlled by the owner", nil, &metav1.OwnerReference{APIVersion: "db.example/v2", Kind: "DB", Name: "a", Controller: &yes}, "a"},
		{"controlled by its pod, labelled", map[string]string{"db.example/name": "b"}, &metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "b-1", Controller: &yes}, "b"},
		{"controlled by a DB of another group, labelled", map[string]string{"db.example/name": "c"}, &metav1.OwnerReference{APIVersion: "other.example/v1", Kind: "DB", Name: "x", Controller: &yes}, "c"},
		{"neither", map[string]string{"app": "d"}, nil, ""},
	} {
		claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "data", Labels: tc.labels}}
		if tc.ctl != nil {
			claim.OwnerReferences = []metav1.OwnerReference{*tc.ctl}
		}
		got := sets.Requests(context.Background(), claim)
		switch {
		case tc.want == "" && len(got) != 0, tc.want != "" && (len(got) != 1 || got[0].Name != tc.want || got[0].Namespace != "ns"):
			t.Errorf("%s: %v, want %q", tc.name, got, tc.want)
		}
	}
}
