package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

func ExampleParseName() {
	for _, s := range []string{"DeleteOnStatefulSetDeletionOnly", "DeleteOnScaledownAndOwnerDeletion", "Sometimes"} {
		n, err := lifecycle.ParseName(s)
		if err != nil {
			fmt.Println(err, errors.Is(err, lifecycle.ErrInvalidPolicy))
			continue
		}
		p, _ := n.Policy()
		fmt.Printf("%s: whenDeleted=%s whenScaled=%s\n", n, p.WhenDeleted, p.WhenScaled)
	}
	// Output:
	// DeleteOnOwnerDeletionOnly: whenDeleted=Delete whenScaled=Retain
	// DeleteOnScaledownAndOwnerDeletion: whenDeleted=Delete whenScaled=Delete
	// lifecycle: invalid policy: policy = "Sometimes": must be one of "Retain", "DeleteOnOwnerDeletionOnly", "DeleteOnScaledownOnly", "DeleteOnScaledownAndOwnerDeletion" (or the KEP-1847 names with "StatefulSet") true
}

func ExampleFromStatefulSet() {
	p, _ := lifecycle.FromStatefulSet(&appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenScaled: appsv1.DeletePersistentVolumeClaimRetentionPolicyType})
	n, _ := p.Name()
	fmt.Println(n)
	_, err := lifecycle.FromStatefulSet(&appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: "Orphan"})
	fmt.Println(err)
	// Output:
	// DeleteOnScaledownOnly
	// lifecycle: invalid policy: whenDeleted = "Orphan": must be "Retain" or "Delete"
}

func ExampleOwnerReferences() {
	// The owner is a custom resource; typed objects carry no kind, so name it.
	db := &metav1.ObjectMeta{Name: "db", UID: "db-uid"}
	owner := lifecycle.RefTo(db, schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Database"})
	pod := lifecycle.PodRef(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db-1", UID: "pod-uid"}})
	policy, _ := lifecycle.DeleteOnScaledownAndOwnerDeletion.Policy()

	show := func(plan lifecycle.Plan) {
		fmt.Print(plan.Status, ":")
		for _, r := range plan.OwnerReferences {
			fmt.Printf(" %s/%s controller=%v", r.Kind, r.Name, *r.Controller)
		}
		fmt.Println()
	}
	inRange, _ := lifecycle.OwnerReferences(lifecycle.Ownership{Policy: policy, Owner: owner, Pod: pod}, nil)
	show(inRange)
	condemned, _ := lifecycle.OwnerReferences(lifecycle.Ownership{Policy: policy, Owner: owner, Pod: pod, Condemned: true}, inRange.OwnerReferences)
	show(condemned)
	retained, _ := lifecycle.OwnerReferences(lifecycle.Ownership{Owner: owner, Pod: pod, Condemned: true}, condemned.OwnerReferences)
	show(retained)

	yes := true
	other := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "web", UID: "sts-uid", Controller: &yes}}
	conflict, _ := lifecycle.OwnerReferences(lifecycle.Ownership{Policy: policy, Owner: owner, Pod: pod}, other)
	show(conflict)
	// Output:
	// Update: Database/db controller=true
	// Update: Pod/db-1 controller=true
	// Update:
	// Conflict: StatefulSet/web controller=true
}

func ExampleAnnotations_Reuse() {
	ann := lifecycle.Annotations{Prefix: lifecycle.AerospikeAnnotationPrefix}
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-as-0", Annotations: ann.Track("as-0", 30*24*time.Hour)}}
	fmt.Println(claim.Annotations)

	// The pod is deleted: record when.
	for k, v := range ann.MarkUnmounted(claim, "as-0", now.Add(-31*24*time.Hour)) {
		claim.Annotations[k] = *v
	}
	d, _ := ann.Reuse(claim, "as-0", "", 0, now)
	fmt.Println(d.Verdict, "-", d.Reason)
	// Output:
	// map[aerospike.travelaudience.com/pod-name:as-0 aerospike.travelaudience.com/pvc-ttl:30d]
	// DeleteFirst - claim data-as-0 expired at 2026-11-21T12:00:00Z (unmounted since 2026-10-22T12:00:00Z)
}

// What a collector pass would do, decided on claims and pods read anywhere
// (a cache, a dump), as a kubectl plugin would show it.
func ExampleAnnotations_PlanCollect() {
	var ann lifecycle.Annotations
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	claim := func(name string, unmounted time.Duration) *corev1.PersistentVolumeClaim {
		c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: ann.Track("db", 24*time.Hour)}}
		c.Annotations[ann.LastUnmountedKey()] = now.Add(-unmounted).Format(time.RFC3339)
		return c
	}
	claims := []*corev1.PersistentVolumeClaim{claim("data-db-0", 50*time.Hour), claim("data-db-1", 30*time.Hour), claim("data-db-2", time.Hour)}
	// A pod mounts data-db-0 although it is marked unmounted.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "restore"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{{
		Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-db-0"}}}}}}

	plan, err := ann.PlanCollect(claims, []*corev1.Pod{pod}, 0, now)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range plan.Delete {
		fmt.Println("delete:", d.Reason)
	}
	for _, s := range plan.Mounted {
		fmt.Println("keep:", s.Claim, "-", s.Detail)
	}
	fmt.Println("next expiry in", plan.RequeueAfter)
	// Output:
	// delete: claim data-db-1 unmounted since 2026-11-21T06:00:00Z expired at 2026-11-22T06:00:00Z
	// keep: data-db-0 - pod restore mounts it; its groundskeeper.io/last-unmounted-on annotation is out of date
	// next expiry in 23h0m0s
}

// A Manager collecting the claims of a database whose pods come and go.
// memClient stands in for the API server so that the example runs here;
// an operator passes lifecycle.ClientGo(clientset.CoreV1()), or crt's client
// over a controller-runtime manager.
func ExampleManager() {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	ann := lifecycle.Annotations{}
	api := newMemClient()
	for _, pod := range []string{"db-0", "db-1", "db-2"} {
		api.addClaim("ns", "data-"+pod, ann.Track(pod, 24*time.Hour)) // pvc-ttl: 1d
	}
	api.addPod("ns", "db-0", "data-db-0")

	m, err := lifecycle.New(lifecycle.Config{Client: api, Clock: clk,
		Recorder: lifecycle.EventFunc(func(_ runtime.Object, _, reason, msg string) { fmt.Println("event:", reason, "-", msg) })})
	if err != nil {
		fmt.Println(err)
		return
	}
	// Pods db-1 and db-2 were deleted (scale-down, say): record it. The
	// Manager checks that no pod mounts the claim before it marks it.
	clk.Step(-48 * time.Hour)
	if _, err := m.MarkUnmounted(ctx, lifecycle.PodClaim{Namespace: "ns", Pod: "db-1", Claim: "data-db-1"}); err != nil {
		fmt.Println(err)
	}
	clk.Step(36 * time.Hour)
	if _, err := m.MarkUnmounted(ctx, lifecycle.PodClaim{Namespace: "ns", Pod: "db-2", Claim: "data-db-2"}); err != nil {
		fmt.Println(err)
	}
	clk.Step(12 * time.Hour) // back to now

	owner := lifecycle.RefTo(&metav1.ObjectMeta{Name: "db", UID: "db-uid"}, schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Database"})
	scope := lifecycle.Scope{Namespace: "ns"}

	// A dry run says what a pass would delete, and deletes nothing.
	res, err := m.Collect(ctx, lifecycle.CollectOptions{Scope: scope, DryRun: true})
	if err != nil {
		fmt.Println(err)
	}
	for _, d := range res.Deleted {
		fmt.Println("would delete:", d.Reason)
	}

	// The pass itself: data-db-1 expired a day after db-1 went; data-db-2
	// expires in 12 hours, when the caller requeues.
	res, err = m.Collect(ctx, lifecycle.CollectOptions{Scope: scope, Owner: &owner})
	if err != nil {
		fmt.Println(err)
	}
	fmt.Println("deleted:", len(res.Deleted), "requeue after:", res.RequeueAfter)

	// db-2 comes back before its claim expires: it may mount the claim,
	// whose mark CheckReuse removes so that no collector deletes it.
	dec, err := m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: "ns", Pod: "db-2", Claim: "data-db-2"}, &lifecycle.ReuseOptions{Owner: &owner})
	if err != nil {
		fmt.Println(err)
	}
	fmt.Println("data-db-2:", dec.Verdict)
	claim, _ := api.GetClaim(ctx, "ns", "data-db-2")
	_, marked := claim.Annotations[ann.LastUnmountedKey()]
	fmt.Println("data-db-2 marked unmounted:", marked)
	fmt.Println("claims:", api.claimNames())
	// Output:
	// would delete: claim data-db-1 unmounted since 2026-11-20T12:00:00Z expired at 2026-11-21T12:00:00Z
	// event: ClaimCollected - claim data-db-1 unmounted since 2026-11-20T12:00:00Z expired at 2026-11-21T12:00:00Z
	// deleted: 1 requeue after: 12h0m0s
	// data-db-2: Reuse
	// data-db-2 marked unmounted: false
	// claims: [data-db-0 data-db-2]
}

// memClient is a lifecycle.Client over maps, with the API server's
// resourceVersion checks on patches and preconditions on deletes, for the
// example. It answers every list in one page.
type memClient struct {
	mu     sync.Mutex
	rv     int
	claims map[types.NamespacedName]*corev1.PersistentVolumeClaim
	pods   map[types.NamespacedName]*corev1.Pod
}

func newMemClient() *memClient {
	return &memClient{claims: map[types.NamespacedName]*corev1.PersistentVolumeClaim{},
		pods: map[types.NamespacedName]*corev1.Pod{}}
}

func (c *memClient) nextRV() string { c.rv++; return strconv.Itoa(c.rv) }

func (c *memClient) addClaim(namespace, name string, annotations map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.claims[types.NamespacedName{Namespace: namespace, Name: name}] = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: namespace, Name: name, UID: types.UID(name + "-uid"), ResourceVersion: c.nextRV(), Annotations: annotations}}
}

func (c *memClient) addPod(namespace, name string, claims ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, ResourceVersion: c.nextRV()}}
	for _, cl := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: cl, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: cl}}})
	}
	c.pods[types.NamespacedName{Namespace: namespace, Name: name}] = p
}

func (c *memClient) claimNames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for k := range c.claims {
		names = append(names, k.Name)
	}
	slices.Sort(names)
	return names
}

var claimsResource = schema.GroupResource{Resource: "persistentvolumeclaims"}

func (c *memClient) GetClaim(_ context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cl, ok := c.claims[types.NamespacedName{Namespace: namespace, Name: name}]
	if !ok {
		return nil, apierrors.NewNotFound(claimsResource, name)
	}
	return cl.DeepCopy(), nil
}

func (c *memClient) ListClaims(_ context.Context, namespace string, opts metav1.ListOptions) (*corev1.PersistentVolumeClaimList, error) {
	sel, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	list := &corev1.PersistentVolumeClaimList{}
	for _, k := range slices.SortedFunc(maps.Keys(c.claims), func(a, b types.NamespacedName) int { return cmpName(a, b) }) {
		if cl := c.claims[k]; k.Namespace == namespace && sel.Matches(labels.Set(cl.Labels)) {
			list.Items = append(list.Items, *cl.DeepCopy())
		}
	}
	return list, nil
}

func (c *memClient) ListPods(_ context.Context, namespace string, opts metav1.ListOptions) (*corev1.PodList, error) {
	sel, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	list := &corev1.PodList{}
	for _, k := range slices.SortedFunc(maps.Keys(c.pods), func(a, b types.NamespacedName) int { return cmpName(a, b) }) {
		if p := c.pods[k]; k.Namespace == namespace && sel.Matches(labels.Set(p.Labels)) {
			list.Items = append(list.Items, *p.DeepCopy())
		}
	}
	return list, nil
}

// PatchClaim applies a JSON merge patch, refusing it with a conflict when it
// carries a resourceVersion that is not the claim's, as the API server does.
func (c *memClient) PatchClaim(_ context.Context, namespace, name string, mergePatch []byte) (*corev1.PersistentVolumeClaim, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := types.NamespacedName{Namespace: namespace, Name: name}
	cl, ok := c.claims[key]
	if !ok {
		return nil, apierrors.NewNotFound(claimsResource, name)
	}
	var patch map[string]any
	if err := json.Unmarshal(mergePatch, &patch); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if meta, _ := patch["metadata"].(map[string]any); meta != nil {
		if rv, ok := meta["resourceVersion"].(string); ok && rv != cl.ResourceVersion {
			return nil, apierrors.NewConflict(claimsResource, name, fmt.Errorf("resourceVersion %s is not %s", rv, cl.ResourceVersion))
		}
	}
	var doc map[string]any
	raw, _ := json.Marshal(cl)
	_ = json.Unmarshal(raw, &doc)
	raw, _ = json.Marshal(mergeJSON(doc, patch))
	patched := &corev1.PersistentVolumeClaim{}
	if err := json.Unmarshal(raw, patched); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	patched.ResourceVersion = c.nextRV()
	c.claims[key] = patched
	return patched.DeepCopy(), nil
}

// mergeJSON applies an RFC 7386 merge patch to doc.
func mergeJSON(doc, patch map[string]any) map[string]any {
	if doc == nil {
		doc = map[string]any{}
	}
	for k, v := range patch {
		switch pv := v.(type) {
		case nil:
			delete(doc, k)
		case map[string]any:
			sub, _ := doc[k].(map[string]any)
			doc[k] = mergeJSON(sub, pv)
		default:
			doc[k] = v
		}
	}
	return doc
}

func (c *memClient) DeleteClaim(_ context.Context, namespace, name string, pre metav1.Preconditions) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := types.NamespacedName{Namespace: namespace, Name: name}
	cl, ok := c.claims[key]
	switch {
	case !ok:
		return apierrors.NewNotFound(claimsResource, name)
	case pre.UID != nil && *pre.UID != cl.UID, pre.ResourceVersion != nil && *pre.ResourceVersion != cl.ResourceVersion:
		return apierrors.NewConflict(claimsResource, name, fmt.Errorf("precondition failed"))
	}
	delete(c.claims, key)
	return nil
}

func cmpName(a, b types.NamespacedName) int {
	if a.Namespace != b.Namespace {
		if a.Namespace < b.Namespace {
			return -1
		}
		return 1
	}
	switch {
	case a.Name < b.Name:
		return -1
	case a.Name > b.Name:
		return 1
	}
	return 0
}

var podsResource = schema.GroupResource{Resource: "pods"}

func (c *memClient) CreateClaim(_ context.Context, claim *corev1.PersistentVolumeClaim) (*corev1.PersistentVolumeClaim, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}
	if _, ok := c.claims[key]; ok {
		return nil, apierrors.NewAlreadyExists(claimsResource, claim.Name)
	}
	created := claim.DeepCopy()
	created.UID, created.ResourceVersion = types.UID(fmt.Sprintf("%s-uid%d", claim.Name, c.rv+1)), c.nextRV()
	c.claims[key] = created
	return created.DeepCopy(), nil
}

func (c *memClient) CreatePod(_ context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	if _, ok := c.pods[key]; ok {
		return nil, apierrors.NewAlreadyExists(podsResource, pod.Name)
	}
	created := pod.DeepCopy()
	created.UID, created.ResourceVersion = types.UID(fmt.Sprintf("%s-uid%d", pod.Name, c.rv+1)), c.nextRV()
	c.pods[key] = created
	return created.DeepCopy(), nil
}

// PatchPod applies a JSON merge patch, refusing it with a conflict when it
// carries a uid that is not the pod's, as the API server does.
func (c *memClient) PatchPod(_ context.Context, namespace, name string, mergePatch []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := types.NamespacedName{Namespace: namespace, Name: name}
	p, ok := c.pods[key]
	if !ok {
		return apierrors.NewNotFound(podsResource, name)
	}
	var patch map[string]any
	if err := json.Unmarshal(mergePatch, &patch); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if meta, _ := patch["metadata"].(map[string]any); meta != nil {
		if uid, ok := meta["uid"].(string); ok && types.UID(uid) != p.UID {
			return apierrors.NewConflict(podsResource, name, fmt.Errorf("uid %s is not %s", uid, p.UID))
		}
	}
	var doc map[string]any
	raw, _ := json.Marshal(p)
	_ = json.Unmarshal(raw, &doc)
	raw, _ = json.Marshal(mergeJSON(doc, patch))
	patched := &corev1.Pod{}
	if err := json.Unmarshal(raw, patched); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	patched.ResourceVersion = c.nextRV()
	c.pods[key] = patched
	return nil
}

func (c *memClient) DeletePod(_ context.Context, namespace, name string, pre metav1.Preconditions) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := types.NamespacedName{Namespace: namespace, Name: name}
	p, ok := c.pods[key]
	switch {
	case !ok:
		return apierrors.NewNotFound(podsResource, name)
	case pre.UID != nil && *pre.UID != p.UID, pre.ResourceVersion != nil && *pre.ResourceVersion != p.ResourceVersion:
		return apierrors.NewConflict(podsResource, name, fmt.Errorf("precondition failed"))
	}
	delete(c.pods, key)
	return nil
}

var _ lifecycle.Client = (*memClient)(nil)
