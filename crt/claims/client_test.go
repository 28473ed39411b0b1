package claims_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/crt/claims"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// startManager starts a controller-runtime manager on the test API server,
// caching the namespace only, and returns it once its cache has synced.
func startManager(t *testing.T, env *testenv.Kubernetes) ctrl.Manager {
	t.Helper()
	mgr := env.NewManager(t, scheme.Scheme)
	// Informers start on first use: ask for the two this test reads.
	for _, obj := range []client.Object{&corev1.PersistentVolumeClaim{}, &corev1.Pod{}} {
		if _, err := mgr.GetCache().GetInformer(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
	}
	testenv.StartManager(t, mgr)
	return mgr
}

func claim(name string, ann map[string]string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
}

func pod(name, claimName string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{
		Containers:                    []corev1.Container{{Name: "db", Image: "db:1"}},
		TerminationGracePeriodSeconds: ptr.To[int64](0),
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName}}}}}}
}

// staleCache is a manager client whose cache has not seen any pod yet.
type staleCache struct{ client.Client }

func (s staleCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.PodList); ok {
		return nil
	}
	return s.Client.List(ctx, list, opts...)
}

// lifecycle wired into a controller-runtime manager: the collector reads
// claims and pods from the manager's cache, marks and deletes through its
// client, and reads fresh what it must from the API reader.
func TestLifecycleOnAManager(t *testing.T) {
	env := testenv.StartKubernetes(t)
	mgr := startManager(t, env)
	ctx := context.Background()
	ns := env.Namespace
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	m, err := lifecycle.New(lifecycle.Config{
		Client:     claims.Client(mgr.GetClient(), mgr.GetAPIReader()),
		Clock:      clk,
		DefaultTTL: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	ann := m.Annotations()
	expired := clk.Now().Add(-2 * time.Hour).Format(time.RFC3339)
	pvcs, pods := env.Client.CoreV1().PersistentVolumeClaims(ns), env.Client.CoreV1().Pods(ns)
	for _, c := range []*corev1.PersistentVolumeClaim{
		claim("data-0", map[string]string{ann.PodNameKey(): "db-0", ann.LastUnmountedKey(): expired}),
		claim("data-1", map[string]string{ann.PodNameKey(): "db-1", ann.LastUnmountedKey(): expired}),
		claim("data-2", map[string]string{ann.PodNameKey(): "db-2"}),
	} {
		if _, err := pvcs.Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []*corev1.Pod{pod("db-1", "data-1"), pod("db-2", "data-2")} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	scope := lifecycle.Scope{Namespace: ns, Claims: claims.Cache(mgr.GetClient()), Pods: claims.PodCache(mgr.GetClient())}
	var res lifecycle.CollectResult
	// The cache catches up with the creations above within a moment.
	deadline := time.Now().Add(2 * time.Minute)
	for res.Listed != 3 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if res, err = m.Collect(ctx, lifecycle.CollectOptions{Scope: scope, DryRun: true}); err != nil {
			t.Fatal(err)
		}
	}
	if res.Listed != 3 || len(res.Deleted) != 1 || res.Deleted[0].Claim != "data-0" {
		t.Fatalf("dry run: listed %d, would delete %+v; want data-0 of 3", res.Listed, res.Deleted)
	}
	if res, err = m.Collect(ctx, lifecycle.CollectOptions{Scope: scope}); err != nil || len(res.Deleted) != 1 || res.Deleted[0].Claim != "data-0" {
		t.Fatalf("collect: deleted %+v, %v; want data-0", res.Deleted, err)
	}
	got, err := pvcs.Get(ctx, "data-1", metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp != nil {
		t.Fatalf("mounted claim data-1: %v, deleting %v", err, got.DeletionTimestamp)
	}
	if _, ok := got.Annotations[ann.LastUnmountedKey()]; ok {
		t.Errorf("mounted claim data-1 still carries its out-of-date mark")
	}

	// A pod the cache has not seen still counts: MarkUnmounted lists pods
	// through the API reader.
	stale := claims.Client(staleCache{mgr.GetClient()}, mgr.GetAPIReader())
	ms, err := lifecycle.New(lifecycle.Config{Client: stale, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if unmounted, err := ms.MarkUnmounted(ctx, lifecycle.PodClaim{Namespace: ns, Pod: "db-2", Claim: "data-2"}); err != nil || unmounted {
		t.Errorf("MarkUnmounted of data-2, mounted by db-2: unmounted %v, %v; want false", unmounted, err)
	}
}

// The adapter returns the API server's errors with their type.
func TestClientKeepsErrorTypes(t *testing.T) {
	env := testenv.StartKubernetes(t)
	c, err := client.New(env.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	lc := claims.Client(c, c)
	ctx := context.Background()
	ns := env.Namespace
	if _, err := lc.GetClaim(ctx, ns, "absent"); !apierrors.IsNotFound(err) {
		t.Errorf("GetClaim of an absent claim: %v, want NotFound", err)
	}
	created, err := env.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim("data", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other := types.UID("00000000-0000-4000-8000-000000000000")
	if err := lc.DeleteClaim(ctx, ns, "data", metav1.Preconditions{UID: &other}); !apierrors.IsConflict(err) {
		t.Errorf("DeleteClaim with another UID: %v, want Conflict", err)
	}
	stale := "1"
	if _, err := lc.PatchClaim(ctx, ns, "data", []byte(`{"metadata":{"resourceVersion":"`+stale+`","labels":{"a":"b"}}}`)); !apierrors.IsConflict(err) {
		t.Errorf("PatchClaim on an old resourceVersion: %v, want Conflict", err)
	}
	patched, err := lc.PatchClaim(ctx, ns, "data", []byte(`{"metadata":{"labels":{"a":"b"}}}`))
	if err != nil || patched.Labels["a"] != "b" || patched.UID != created.UID {
		t.Errorf("PatchClaim: %+v, %v", patched, err)
	}
	list, err := lc.ListClaims(ctx, ns, metav1.ListOptions{LabelSelector: "a=b", Limit: 10})
	if err != nil || len(list.Items) != 1 {
		t.Errorf("ListClaims a=b: %v, %v", list, err)
	}
	if _, err := lc.ListPods(ctx, ns, metav1.ListOptions{LabelSelector: "a=("}); err == nil {
		t.Error("ListPods with a bad selector: no error")
	}
	uid := created.UID
	if err := lc.DeleteClaim(ctx, ns, "data", metav1.Preconditions{UID: &uid}); err != nil {
		t.Errorf("DeleteClaim with its UID: %v", err)
	}
	if err := lc.DeleteClaim(ctx, ns, "data", metav1.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("DeleteClaim again: %v, want nil or NotFound", err)
	}
}

// countingClient counts the list requests that carry a continue token.
type countingClient struct {
	client.Client
	continued *int
}

func (c countingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	var lo client.ListOptions
	lo.ApplyOptions(opts)
	if lo.Continue != "" {
		*c.continued++
	}
	return c.Client.List(ctx, list, opts...)
}

// lifecycle pages its claim lists; the manager's cache cannot continue a
// list and answers each with a continue token it then refuses. Collect and
// SyncOwner without Scope.Claims, over more claims than one page, work
// through Client on a started manager's cache.
func TestClientListsClaimsFromTheManagersCache(t *testing.T) {
	env := testenv.StartKubernetes(t)
	mgr := startManager(t, env)
	ctx := context.Background()
	ns := env.Namespace
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	const pageSize, total, expired = 2, 5, 3
	m, err := lifecycle.New(lifecycle.Config{
		Client:     claims.Client(mgr.GetClient(), mgr.GetAPIReader()),
		Clock:      clk,
		DefaultTTL: time.Hour,
		PageSize:   pageSize,
	})
	if err != nil {
		t.Fatal(err)
	}
	owner, err := env.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "db"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ann := m.Annotations()
	var members []lifecycle.Member
	for i := range total {
		a := ann.Track(fmt.Sprintf("db-%d", i), 0)
		if i < expired {
			a[ann.LastUnmountedKey()] = clk.Now().Add(-2 * time.Hour).Format(time.RFC3339)
		}
		c := claim(fmt.Sprintf("data-%d", i), a)
		c.Labels = map[string]string{"app": "db"}
		if _, err := env.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		members = append(members, lifecycle.Member{
			Pod:    lifecycle.Ref{APIVersion: "v1", Kind: "Pod", Name: fmt.Sprintf("db-%d", i), UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-00000000000%d", i))},
			Claims: []string{c.Name}})
	}
	// Wait until the cache shows every claim.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var list corev1.PersistentVolumeClaimList
		if err := mgr.GetClient().List(ctx, &list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) == total {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cache shows %d claims, want %d", len(list.Items), total)
		}
		time.Sleep(50 * time.Millisecond)
	}
	scope := lifecycle.Scope{Namespace: ns, Selector: labels.SelectorFromSet(labels.Set{"app": "db"})}

	ref := lifecycle.Ref{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}
	synced, err := m.SyncOwner(ctx, scope, ref, lifecycle.Policy{WhenDeleted: lifecycle.ActionDelete}, members, nil)
	if err != nil {
		t.Fatalf("SyncOwner over %d claims, %d a page, from the cache: %v", total, pageSize, err)
	}
	if len(synced) != total {
		t.Fatalf("SyncOwner synced %d claims, want %d", len(synced), total)
	}
	for _, s := range synced {
		if s.Missing || s.Err != nil {
			t.Errorf("SyncOwner: claim %s missing %t, %v", s.Claim, s.Missing, s.Err)
			continue
		}
		got, err := env.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, s.Claim, metav1.GetOptions{})
		if err != nil || len(got.OwnerReferences) != 1 || got.OwnerReferences[0].UID != owner.UID {
			t.Errorf("claim %s after SyncOwner: owner references %+v, %v; want the ConfigMap's", s.Claim, got.OwnerReferences, err)
		}
	}

	res, err := m.Collect(ctx, lifecycle.CollectOptions{Scope: scope, DryRun: true})
	if err != nil {
		t.Fatalf("Collect dry run over %d claims, %d a page, from the cache: %v", total, pageSize, err)
	}
	if res.Listed != total || len(res.Deleted) != expired {
		t.Fatalf("Collect dry run: listed %d, would delete %+v; want %d listed, %d deleted", res.Listed, res.Deleted, total, expired)
	}
	if res, err = m.Collect(ctx, lifecycle.CollectOptions{Scope: scope}); err != nil || len(res.Deleted) != expired {
		t.Fatalf("Collect: deleted %+v, %v; want %d", res.Deleted, err, expired)
	}
	for i := range total {
		got, err := env.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, fmt.Sprintf("data-%d", i), metav1.GetOptions{})
		gone := apierrors.IsNotFound(err) || (err == nil && got.DeletionTimestamp != nil)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		if want := i < expired; gone != want {
			t.Errorf("claim data-%d gone or going: %t, want %t", i, gone, want)
		}
	}
}

// A claim list Client sends to the API server (claims not cached)
// is still paged, and pods listed from a cache are refused.
func TestClientPagesTheAPIServerAndRefusesCachedPods(t *testing.T) {
	env := testenv.StartKubernetes(t)
	ctx := context.Background()
	ns := env.Namespace
	direct, err := client.New(env.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := env.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim(fmt.Sprintf("data-%d", i), nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var continued int
	m, err := lifecycle.New(lifecycle.Config{Client: claims.Client(countingClient{direct, &continued}, direct), PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Collect(ctx, lifecycle.CollectOptions{Scope: lifecycle.Scope{Namespace: ns}, DryRun: true})
	if err != nil || res.Listed != 5 {
		t.Fatalf("Collect from the API server: listed %d, %v; want 5", res.Listed, err)
	}
	if continued != 2 {
		t.Errorf("%d list requests continued a page, want 2 (5 claims, 2 a page)", continued)
	}

	mgr := startManager(t, env)
	cached := claims.Client(mgr.GetClient(), mgr.GetClient())
	if _, err := cached.ListPods(ctx, ns, metav1.ListOptions{Limit: 2}); err == nil || !strings.Contains(err.Error(), "GetAPIReader") {
		t.Errorf("ListPods from the manager's cache: %v, want an error naming mgr.GetAPIReader()", err)
	}
}
