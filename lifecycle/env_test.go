package lifecycle_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// workload is what a scenario drives: a real StatefulSet, or pods and claims
// of a custom owner managed by an operator that uses lifecycle.
type workload interface {
	create(ctx context.Context, replicas int, policy lifecycle.Policy) error
	scale(ctx context.Context, replicas int) error
	deletePod(ctx context.Context, ordinal int) error
	deleteOwner(ctx context.Context, propagation metav1.DeletionPropagation) error
	setPolicy(ctx context.Context, policy lifecycle.Policy) error
	// step runs the workload's controller once: a no-op for the
	// StatefulSet, whose controller runs in the controller manager.
	step(ctx context.Context) error
	// ready reports that the pods the workload wants exist.
	ready(ctx context.Context) (bool, error)
	snapshot(ctx context.Context) (snapshot, error)
}

// claimView is a claim seen independently of the owner's kind and name.
type claimView struct {
	Ordinal     int
	Refs        string // normalized owner references
	Fresh       bool   // a claim with another UID than the first one of that name
	Terminating bool
}

type snapshot struct {
	Claims []claimView
	Pods   []int // ordinals of existing, non-terminating pods
	raw    string
	// gcPending: some claim refers to a pod or owner that is gone, so the
	// garbage collector has work to do.
	gcPending bool
}

func (s snapshot) String() string {
	var b strings.Builder
	for _, c := range s.Claims {
		fmt.Fprintf(&b, "claim-%d{refs=[%s]", c.Ordinal, c.Refs)
		if c.Fresh {
			b.WriteString(" fresh")
		}
		if c.Terminating {
			b.WriteString(" terminating")
		}
		b.WriteString("} ")
	}
	fmt.Fprintf(&b, "pods=%v", s.Pods)
	return b.String()
}

// specs are the pod and claim specs of a workload: podSpec's and
// claimSpec's, and on nodes the claims name a pool's class and the pods
// take a grace period to terminate.
type specs struct {
	class *string
	grace *int64
}

func (s specs) pod(claim string) corev1.PodSpec {
	p := podSpec(claim)
	if s.grace != nil {
		p.TerminationGracePeriodSeconds = s.grace
	}
	return p
}

func (s specs) claim() corev1.PersistentVolumeClaimSpec {
	c := claimSpec()
	c.StorageClassName = s.class
	return c
}

// common state and helpers of both workloads.
type base struct {
	specs
	c         kubernetes.Interface
	ns        string
	name      string
	firstUIDs map[string]types.UID
	ownerRef  func(*metav1.OwnerReference) bool
	ownerGone func(context.Context) (bool, error)
}

func ordinalOf(name, prefix string) (int, bool) {
	if !strings.HasPrefix(name, prefix) {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimPrefix(name, prefix))
	return n, err == nil
}

func (b *base) snapshotWith(ctx context.Context, claimPrefix, podPrefix string) (snapshot, error) {
	var s snapshot
	claims, err := b.c.CoreV1().PersistentVolumeClaims(b.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return s, err
	}
	pods, err := b.c.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return s, err
	}
	ownerGone, err := b.ownerGone(ctx)
	if err != nil {
		return s, err
	}
	livePods := map[types.UID]bool{}
	for _, p := range pods.Items {
		livePods[p.UID] = true
	}
	var raw strings.Builder
	for _, c := range claims.Items {
		i, ok := ordinalOf(c.Name, claimPrefix)
		if !ok {
			continue
		}
		if _, seen := b.firstUIDs[c.Name]; !seen {
			b.firstUIDs[c.Name] = c.UID
		}
		var refs []string
		for _, r := range c.OwnerReferences {
			var who string
			switch {
			case b.ownerRef(&r):
				who = "Owner"
				s.gcPending = s.gcPending || ownerGone
			case r.Kind == "Pod":
				s.gcPending = s.gcPending || !livePods[r.UID]
				if n, ok := ordinalOf(r.Name, podPrefix); ok {
					who = fmt.Sprintf("Pod/%d", n)
				} else {
					who = "Pod/" + r.Name
				}
			default:
				who = r.Kind + "/" + r.Name
			}
			if ptr.Deref(r.Controller, false) {
				who += "+ctl"
			}
			if ptr.Deref(r.BlockOwnerDeletion, false) {
				who += "+block"
			}
			refs = append(refs, who)
		}
		sort.Strings(refs)
		s.Claims = append(s.Claims, claimView{Ordinal: i, Refs: strings.Join(refs, ","),
			Fresh: b.firstUIDs[c.Name] != c.UID, Terminating: c.DeletionTimestamp != nil})
		fmt.Fprintf(&raw, "%s/%s ", c.Name, c.ResourceVersion)
	}
	for _, p := range pods.Items {
		if i, ok := ordinalOf(p.Name, podPrefix); ok {
			fmt.Fprintf(&raw, "%s/%s ", p.Name, p.ResourceVersion)
			if p.DeletionTimestamp == nil {
				s.Pods = append(s.Pods, i)
			}
		}
	}
	sort.Slice(s.Claims, func(i, j int) bool { return s.Claims[i].Ordinal < s.Claims[j].Ordinal })
	slices.Sort(s.Pods)
	s.raw = raw.String()
	return s, nil
}

func claimSpec() corev1.PersistentVolumeClaimSpec {
	return corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources: corev1.VolumeResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		},
	}
}

func podSpec(claim string) corev1.PodSpec {
	spec := corev1.PodSpec{
		Containers:                    []corev1.Container{{Name: "db", Image: "db:1"}},
		TerminationGracePeriodSeconds: ptr.To[int64](0),
	}
	if claim != "" {
		spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}}
	}
	return spec
}

// ---- the real StatefulSet ----

type statefulSet struct {
	base
	replicas int
}

func newStatefulSet(c kubernetes.Interface, ns, name string) *statefulSet {
	s := &statefulSet{base: base{c: c, ns: ns, name: name, firstUIDs: map[string]types.UID{}}}
	s.ownerRef = func(r *metav1.OwnerReference) bool { return r.Kind == "StatefulSet" && r.Name == name }
	s.ownerGone = func(ctx context.Context) (bool, error) {
		_, err := c.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), client(err)
	}
	return s
}

func (s *statefulSet) create(ctx context.Context, replicas int, policy lifecycle.Policy) error {
	s.replicas = replicas
	sel := map[string]string{"app": s.name}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: s.name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:                             ptr.To(int32(replicas)),
			Selector:                             &metav1.LabelSelector{MatchLabels: sel},
			ServiceName:                          s.name,
			PodManagementPolicy:                  appsv1.ParallelPodManagement,
			PersistentVolumeClaimRetentionPolicy: policy.StatefulSet(),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec:       s.pod(""),
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}, Spec: s.claim()}},
		},
	}
	_, err := s.c.AppsV1().StatefulSets(s.ns).Create(ctx, set, metav1.CreateOptions{})
	return err
}

func (s *statefulSet) scale(ctx context.Context, replicas int) error {
	s.replicas = replicas
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
	_, err := s.c.AppsV1().StatefulSets(s.ns).Patch(ctx, s.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

func (s *statefulSet) setPolicy(ctx context.Context, p lifecycle.Policy) error {
	sp := p.StatefulSet()
	patch := fmt.Sprintf(`{"spec":{"persistentVolumeClaimRetentionPolicy":{"whenDeleted":%q,"whenScaled":%q}}}`, sp.WhenDeleted, sp.WhenScaled)
	_, err := s.c.AppsV1().StatefulSets(s.ns).Patch(ctx, s.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

func (s *statefulSet) deletePod(ctx context.Context, i int) error {
	return s.c.CoreV1().Pods(s.ns).Delete(ctx, fmt.Sprintf("%s-%d", s.name, i), metav1.DeleteOptions{})
}

func (s *statefulSet) deleteOwner(ctx context.Context, p metav1.DeletionPropagation) error {
	s.replicas = -1
	return s.c.AppsV1().StatefulSets(s.ns).Delete(ctx, s.name, metav1.DeleteOptions{PropagationPolicy: &p})
}

func (s *statefulSet) step(context.Context) error { return nil }

func (s *statefulSet) ready(ctx context.Context) (bool, error) {
	if s.replicas < 0 {
		return s.ownerGone(ctx)
	}
	// The controller has seen the last change of the spec.
	set, err := s.c.AppsV1().StatefulSets(s.ns).Get(ctx, s.name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	if set.Status.ObservedGeneration < set.Generation {
		return false, nil
	}
	if ok, err := podsReady(ctx, s.c, s.ns, s.name, s.replicas); !ok || err != nil {
		return ok, err
	}
	// Under whenDeleted: Delete the controller gives each claim of a pod in
	// range a reference to the set, sometimes seconds after creating it:
	// until then it has not converged.
	if p := set.Spec.PersistentVolumeClaimRetentionPolicy; p == nil || p.WhenDeleted != appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
		return true, nil
	}
	claims, err := s.c.CoreV1().PersistentVolumeClaims(s.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	for _, c := range claims.Items {
		i, ok := ordinalOf(c.Name, "data-"+s.name+"-")
		if !ok || i >= s.replicas || c.DeletionTimestamp != nil {
			continue
		}
		if !slices.ContainsFunc(c.OwnerReferences, func(r metav1.OwnerReference) bool { return s.ownerRef(&r) }) {
			return false, nil
		}
	}
	return true, nil
}

// client returns err unless it is NotFound.
func client(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (s *statefulSet) snapshot(ctx context.Context) (snapshot, error) {
	return s.snapshotWith(ctx, "data-"+s.name+"-", s.name+"-")
}

// podsReady reports that exactly pods name-0..name-(n-1) exist and are not
// terminating; n < 0 means "whatever exists".
func podsReady(ctx context.Context, c kubernetes.Interface, ns, name string, n int) (bool, error) {
	if n < 0 {
		return true, nil
	}
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(map[string]string{"app": name}).String()})
	if err != nil {
		return false, err
	}
	live := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			return false, nil
		}
		if i, ok := ordinalOf(p.Name, name+"-"); !ok || i >= n {
			return false, nil
		}
		live++
	}
	return live == n, nil
}

// ---- a custom owner driven by lifecycle ----

// operator is a minimal operator for a custom owner kind (a ConfigMap stands
// for the custom resource: the garbage collector treats every kind alike).
// It does what a stateful-system operator does, with lifecycle doing the
// claim hygiene.
type operator struct {
	base
	kind     ownerKind
	m        *lifecycle.Manager
	owner    lifecycle.Ref
	policy   lifecycle.Policy
	replicas int
	deleted  bool
}

func newOperator(c kubernetes.Interface, m *lifecycle.Manager, kind ownerKind, ns, name string) *operator {
	o := &operator{base: base{c: c, ns: ns, name: name, firstUIDs: map[string]types.UID{}}, m: m, kind: kind}
	o.ownerRef = func(r *metav1.OwnerReference) bool { return r.Kind == kind.kind() && r.Name == name }
	o.ownerGone = func(ctx context.Context) (bool, error) { return kind.gone(ctx, ns, name) }
	return o
}

// ownerKind creates and deletes the owner object of a custom operator.
type ownerKind interface {
	kind() string
	create(ctx context.Context, ns, name string) (lifecycle.Ref, error)
	delete(ctx context.Context, ns, name string, p metav1.DeletionPropagation) error
	// gone reports that the owner no longer exists.
	gone(ctx context.Context, ns, name string) (bool, error)
}

// configMapOwner: a ConfigMap stands for a custom resource.
type configMapOwner struct{ c kubernetes.Interface }

func (configMapOwner) kind() string { return "ConfigMap" }

func (k configMapOwner) create(ctx context.Context, ns, name string) (lifecycle.Ref, error) {
	cm, err := k.c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return lifecycle.Ref{}, err
	}
	return lifecycle.Ref{APIVersion: "v1", Kind: "ConfigMap", Name: cm.Name, UID: cm.UID}, nil
}

func (k configMapOwner) delete(ctx context.Context, ns, name string, p metav1.DeletionPropagation) error {
	return k.c.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &p})
}

func (k configMapOwner) gone(ctx context.Context, ns, name string) (bool, error) {
	_, err := k.c.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	return apierrors.IsNotFound(err), client(err)
}

func (o *operator) podName(i int) string   { return fmt.Sprintf("%s-%d", o.name, i) }
func (o *operator) claimName(i int) string { return fmt.Sprintf("data-%s-%d", o.name, i) }

func (o *operator) create(ctx context.Context, replicas int, policy lifecycle.Policy) error {
	owner, err := o.kind.create(ctx, o.ns, o.name)
	if err != nil {
		return err
	}
	o.owner = owner
	o.policy, o.replicas = policy, replicas
	return o.step(ctx)
}

func (o *operator) scale(ctx context.Context, n int) error { o.replicas = n; return o.step(ctx) }

func (o *operator) setPolicy(ctx context.Context, p lifecycle.Policy) error {
	o.policy = p
	return o.step(ctx)
}

func (o *operator) deletePod(ctx context.Context, i int) error {
	return o.c.CoreV1().Pods(o.ns).Delete(ctx, o.podName(i), metav1.DeleteOptions{})
}

func (o *operator) deleteOwner(ctx context.Context, p metav1.DeletionPropagation) error {
	o.deleted = true
	return o.kind.delete(ctx, o.ns, o.name, p)
}

func (o *operator) ready(ctx context.Context) (bool, error) {
	if o.deleted {
		return o.kind.gone(ctx, o.ns, o.name)
	}
	return podsReady(ctx, o.c, o.ns, o.name, o.replicas)
}

func (o *operator) snapshot(ctx context.Context) (snapshot, error) {
	return o.snapshotWith(ctx, "data-"+o.name+"-", o.name+"-")
}

// step is one reconcile of the owner.
func (o *operator) step(ctx context.Context) error {
	if o.deleted {
		return nil // the owner is gone: nothing reconciles any more
	}
	sel := labels.SelectorFromSet(map[string]string{"app": o.name})
	podList, err := o.c.CoreV1().Pods(o.ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return err
	}
	pods := map[int]*corev1.Pod{}
	for i := range podList.Items {
		if n, ok := ordinalOf(podList.Items[i].Name, o.name+"-"); ok {
			pods[n] = &podList.Items[i]
		}
	}
	var members []lifecycle.Member
	for i := 0; i < o.replicas; i++ {
		pod := pods[i]
		if pod == nil {
			// Before creating the pod: never reuse a claim that is going
			// away or still belongs to the previous pod of this name.
			dec, err := o.m.CheckReuse(ctx, lifecycle.PodClaim{Namespace: o.ns, Pod: o.podName(i), Claim: o.claimName(i)}, &lifecycle.ReuseOptions{Owner: &o.owner})
			if err != nil {
				return err
			}
			switch dec.Verdict {
			case lifecycle.VerdictWait, lifecycle.VerdictDeleteFirst:
				continue
			case lifecycle.VerdictCreate:
				claim := &corev1.PersistentVolumeClaim{
					ObjectMeta: metav1.ObjectMeta{Name: o.claimName(i), Labels: map[string]string{"app": o.name},
						Annotations: o.m.Annotations().Track(o.podName(i), 0)},
					Spec: o.claim(),
				}
				if _, err := o.c.CoreV1().PersistentVolumeClaims(o.ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
					if apierrors.IsAlreadyExists(err) {
						continue
					}
					return err
				}
			}
			p := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: o.podName(i), Labels: map[string]string{"app": o.name},
					OwnerReferences: []metav1.OwnerReference{{APIVersion: o.owner.APIVersion, Kind: o.owner.Kind, Name: o.owner.Name, UID: o.owner.UID,
						Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
				Spec: o.pod(o.claimName(i)),
			}
			pod, err = o.c.CoreV1().Pods(o.ns).Create(ctx, p, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				continue
			}
			if err != nil {
				return err
			}
		}
		if pod.DeletionTimestamp != nil {
			continue
		}
		members = append(members, lifecycle.Member{Pod: lifecycle.PodRef(pod), Claims: []string{o.claimName(i)}})
	}
	var condemned []*corev1.Pod
	for i, pod := range pods {
		if i >= o.replicas && pod.DeletionTimestamp == nil {
			condemned = append(condemned, pod)
			members = append(members, lifecycle.Member{Pod: lifecycle.PodRef(pod), Condemned: true, Claims: []string{o.claimName(i)}})
		}
	}
	// Claims first, then scale down: a condemned pod's claims get their
	// references before the pod goes.
	if _, err := o.m.SyncOwner(ctx, lifecycle.Scope{Namespace: o.ns, Selector: sel}, o.owner, o.policy, members, nil); err != nil {
		return err
	}
	for _, pod := range condemned {
		err := o.c.CoreV1().Pods(o.ns).Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
		i, _ := ordinalOf(pod.Name, o.name+"-")
		if _, err := o.m.MarkUnmounted(ctx, lifecycle.PodClaim{Namespace: o.ns, Pod: pod.Name, Claim: o.claimName(i)}); err != nil {
			return err
		}
	}
	return nil
}

// settle runs the workload's controller until the pods it wants exist and
// claims and pods have not changed for quiet. The bound is only for a run
// that never settles: on a loaded 2-core machine, 21 parallel workloads on
// nodes once took more than 45 s to settle (TestScenariosOnNodes in CI).
const settleBound = 3 * time.Minute

func settle(ctx context.Context, w workload, quiet time.Duration) (snapshot, error) {
	deadline := time.Now().Add(settleBound)
	var last snapshot
	var since time.Time
	for {
		if err := w.step(ctx); err != nil && !apierrors.IsConflict(err) {
			return last, err
		}
		ok, err := w.ready(ctx)
		if err != nil {
			return last, err
		}
		s, err := w.snapshot(ctx)
		if err != nil {
			return last, err
		}
		terminating := false
		for _, c := range s.Claims {
			terminating = terminating || c.Terminating
		}
		switch {
		case !ok || terminating || s.gcPending || s.raw != last.raw:
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) >= quiet:
			return s, nil
		}
		last = s
		if time.Now().After(deadline) {
			return last, fmt.Errorf("not settled after %s (ready=%v): %s", settleBound, ok, s)
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
