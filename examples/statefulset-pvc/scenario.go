package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/groundskeeper-io/groundskeeper/examples/statefulset-pvc/api"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// The scenario plays the controller's reconcile against a simulated API
// server: a client-go fake clientset for pods and claims (with UIDs added on
// create), the ReplicatedSets in a map, informer caches refreshed before
// every pass, and a tiny garbage collector that deletes an object once every
// owner it refers to is gone. It is a demo: the e2e test runs the same
// controller against a real API server and controller manager.
var scenarioStart = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

const scenarioNamespace = "demo"

type sim struct {
	out    io.Writer
	clk    *clocktesting.FakeClock
	client *fake.Clientset
	sets   map[string]*api.ReplicatedSet
	others map[types.UID]string // live objects of other kinds that own claims
	pods   cache.Indexer
	claims cache.Indexer
	r      *reconciler
	uids   map[string]int
	writes int
	// goneSince is when the garbage collector first saw an owner missing;
	// it acts gcLag later.
	goneSince map[types.UID]time.Time
}

// gcLag is how long the simulated garbage collector takes to act.
const gcLag = 3 * time.Second

func runScenario(out io.Writer) error {
	s := &sim{
		out:    out,
		clk:    clocktesting.NewFakeClock(scenarioStart),
		client: fake.NewClientset(),
		sets:   map[string]*api.ReplicatedSet{},
		others: map[types.UID]string{},
		pods:   cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		claims: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}),
		uids:   map[string]int{},

		goneSince: map[types.UID]time.Time{},
	}
	// The fake gives created objects no UID; the API server would.
	s.client.PrependReactor("create", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		obj := a.(k8stesting.CreateAction).GetObject()
		m, err := meta.Accessor(obj)
		if err != nil {
			return false, nil, err
		}
		m.SetUID(s.uid(map[string]string{"pods": "p", "persistentvolumeclaims": "c"}[a.GetResource().Resource]))
		return false, nil, nil
	})
	s.client.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a.GetVerb() {
		case "create", "update", "patch", "delete":
			s.writes++
		}
		return false, nil, nil
	})
	events := lifecycle.EventFunc(func(obj runtime.Object, eventtype, reason, msg string) {
		ref := obj.(*corev1.ObjectReference)
		if eventtype == corev1.EventTypeWarning {
			reason = "Warning " + reason
		}
		s.printf(ref.Name, "%s: %s", reason, msg)
	})
	m, err := lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(s.client.CoreV1()), Recorder: events, Clock: s.clk})
	if err != nil {
		return err
	}
	s.r = &reconciler{
		core:   s.client.CoreV1(),
		pods:   corelisters.NewPodLister(s.pods),
		claims: corelisters.NewPersistentVolumeClaimLister(s.claims),
		m:      m,
		status: simStatus{s},
		events: events,
		clock:  s.clk,
	}

	fmt.Fprintf(out, "Simulated timeline, %s UTC, namespace %q. One ReplicatedSet per KEP-1847 policy, each with\n", scenarioStart.Format(time.DateOnly), scenarioNamespace)
	fmt.Fprintf(out, "one volume claim template \"data\": created with 3 replicas, scaled to 1, scaled back to 3, deleted.\n")
	fmt.Fprintf(out, "\"gc\" is the (simulated) garbage collector: it deletes an object once all its owners are gone.\n")

	type row struct {
		name                       lifecycle.Name
		policy                     lifecycle.Policy
		scaledDown, scaledUp, gone string
	}
	var table []row
	ctx := context.Background()
	for i, name := range []lifecycle.Name{lifecycle.Retain, lifecycle.DeleteOnOwnerDeletionOnly, lifecycle.DeleteOnScaledownOnly, lifecycle.DeleteOnScaledownAndOwnerDeletion} {
		setName := []string{"retain", "owner-only", "scaledown-only", "both"}[i]
		p, _ := name.Policy()
		fmt.Fprintf(out, "\n== %s (whenDeleted: %s, whenScaled: %s): set %q\n\n", name, p.WhenDeleted, p.WhenScaled, setName)
		s.clk.SetTime(scenarioStart.Add(time.Duration(i) * time.Hour))
		set := &api.ReplicatedSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: scenarioNamespace, Name: setName, UID: s.uid("s"), Generation: 1},
			Spec: api.ReplicatedSetSpec{
				Replicas:             ptr.To(int32(3)),
				Template:             api.PodTemplate{Image: "registry.example/db:1"},
				VolumeClaimTemplates: []api.ClaimTemplate{{Name: "data", Size: resource.MustParse("1Gi")}},
				// The shipped form for two sets, the KEP's name for two.
				PersistentVolumeClaimRetentionPolicy: &api.RetentionPolicy{WhenDeleted: string(p.WhenDeleted), WhenScaled: string(p.WhenScaled)},
			},
		}
		if i%2 == 1 {
			set.Spec.PersistentVolumeClaimRetentionPolicy, set.Spec.PersistentVolumeClaimDeletePolicy = nil, string(name)
		}
		var r row
		r.name, r.policy = name, p
		if err := s.user(ctx, setName, fmt.Sprintf("creates ReplicatedSet %s, 3 replicas, %s", setName, policyField(set)), func() {
			s.sets[setName] = set
		}); err != nil {
			return err
		}
		before := s.claimUIDs(setName)
		if err := s.user(ctx, setName, "scales "+setName+" to 1", func() { s.scale(setName, 1) }); err != nil {
			return err
		}
		r.scaledDown = s.kept(setName, before)
		if err := s.user(ctx, setName, "scales "+setName+" back to 3", func() { s.scale(setName, 3) }); err != nil {
			return err
		}
		r.scaledUp = s.reused(setName, before)
		before = s.claimUIDs(setName)
		if err := s.user(ctx, setName, "deletes ReplicatedSet "+setName, func() { delete(s.sets, setName) }); err != nil {
			return err
		}
		r.gone = s.kept(setName, before)
		table = append(table, r)
	}

	if err := s.quickScaleUp(ctx); err != nil {
		return err
	}
	if err := s.conflict(ctx); err != nil {
		return err
	}

	fmt.Fprintf(out, "\n== Summary: the claims of ordinals 0, 1, 2\n\n")
	fmt.Fprintf(out, "%-34s %-24s %-22s %-22s %s\n", "policy", "whenDeleted/whenScaled", "after 3 -> 1", "after 1 -> 3", "after delete")
	for _, r := range table {
		fmt.Fprintf(out, "%-34s %-24s %-22s %-22s %s\n", r.name, string(r.policy.WhenDeleted)+"/"+string(r.policy.WhenScaled), r.scaledDown, r.scaledUp, r.gone)
	}
	return nil
}

// quickScaleUp: a scale-up before the garbage collector deleted the claim of
// the condemned pod waits for it, then creates a fresh claim (KEP-1847,
// "DeleteOnScaledownOnly": "will wait until the old PVC for the removed Pod
// is deleted").
func (s *sim) quickScaleUp(ctx context.Context) error {
	fmt.Fprintf(s.out, "\n== Scale-up before the garbage collector has acted: set %q, DeleteOnScaledownOnly\n\n", "quick")
	s.clk.SetTime(scenarioStart.Add(4 * time.Hour))
	if err := s.user(ctx, "quick", "creates ReplicatedSet quick, 2 replicas, persistentVolumeClaimDeletePolicy: DeleteOnScaledownOnly", func() {
		s.sets["quick"] = &api.ReplicatedSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: scenarioNamespace, Name: "quick", UID: s.uid("s"), Generation: 1},
			Spec: api.ReplicatedSetSpec{
				Replicas:                          ptr.To(int32(2)),
				Template:                          api.PodTemplate{Image: "registry.example/db:1"},
				VolumeClaimTemplates:              []api.ClaimTemplate{{Name: "data", Size: resource.MustParse("1Gi")}},
				PersistentVolumeClaimDeletePolicy: string(lifecycle.DeleteOnScaledownOnly),
			},
		}
	}); err != nil {
		return err
	}
	if err := s.userGC(ctx, "quick", "scales quick to 1", func() { s.scale("quick", 1) }, false); err != nil {
		return err
	}
	if err := s.user(ctx, "quick", "scales quick back to 2", func() { s.scale("quick", 2) }); err != nil {
		return err
	}
	return s.user(ctx, "quick", "deletes ReplicatedSet quick", func() { delete(s.sets, "quick") })
}

// conflict: a claim that another controller controls keeps its controller,
// whatever the set's policy.
func (s *sim) conflict(ctx context.Context) error {
	fmt.Fprintf(s.out, "\n== A claim controlled by another object: set %q, DeleteOnScaledownAndOwnerDeletion\n\n", "shared")
	s.clk.SetTime(scenarioStart.Add(5 * time.Hour))
	backup := s.uid("b")
	s.others[backup] = "Backup nightly"
	s.printf("user", "creates claim data-shared-0, controlled by Backup nightly (uid %s)", backup)
	if _, err := s.client.CoreV1().PersistentVolumeClaims(scenarioNamespace).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Name: "data-shared-0", Namespace: scenarioNamespace,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "backup.example/v1", Kind: "Backup", Name: "nightly", UID: backup, Controller: ptr.To(true)}},
	}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if err := s.user(ctx, "shared", "creates ReplicatedSet shared, 1 replica, persistentVolumeClaimDeletePolicy: DeleteOnScaledownAndOwnerDeletion", func() {
		s.sets["shared"] = &api.ReplicatedSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: scenarioNamespace, Name: "shared", UID: s.uid("s"), Generation: 1},
			Spec: api.ReplicatedSetSpec{
				Replicas:                          ptr.To(int32(1)),
				Template:                          api.PodTemplate{Image: "registry.example/db:1"},
				VolumeClaimTemplates:              []api.ClaimTemplate{{Name: "data", Size: resource.MustParse("1Gi")}},
				PersistentVolumeClaimDeletePolicy: string(lifecycle.DeleteOnScaledownAndOwnerDeletion),
			},
		}
	}); err != nil {
		return err
	}
	return s.user(ctx, "shared", "deletes ReplicatedSet shared", func() { delete(s.sets, "shared") })
}

// user applies a change, lets the controller and the garbage collector run
// until nothing changes, and prints the claims of the set.
func (s *sim) user(ctx context.Context, set, what string, change func()) error {
	return s.userGC(ctx, set, what, change, true)
}

// userGC is user; with waitGC false it returns once the controller has
// nothing to do, even if the garbage collector still has.
func (s *sim) userGC(ctx context.Context, set, what string, change func(), waitGC bool) error {
	s.printf("user", "%s", what)
	change()
	for pass := 0; ; pass++ {
		if pass == 30 {
			return errors.New("scenario: the controller did not settle after 30 passes")
		}
		s.clk.Step(time.Second)
		writes := s.writes
		if err := s.refresh(); err != nil {
			return err
		}
		for _, name := range slices.Sorted(maps.Keys(s.sets)) {
			if err := s.r.reconcile(ctx, s.sets[name].DeepCopy()); err != nil {
				return err
			}
		}
		pending, err := s.collectGarbage(ctx)
		if err != nil {
			return err
		}
		if s.writes == writes && (!pending || !waitGC) {
			break
		}
	}
	s.printf("", "claims now: %s", s.claimsOf(set))
	return nil
}

// refresh plays the informers: the caches get the fake's current objects.
func (s *sim) refresh() error {
	pods, err := s.client.Tracker().List(corev1.SchemeGroupVersion.WithResource("pods"), corev1.SchemeGroupVersion.WithKind("Pod"), scenarioNamespace)
	if err != nil {
		return err
	}
	claims, err := s.client.Tracker().List(corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"), scenarioNamespace)
	if err != nil {
		return err
	}
	var podObjs, claimObjs []any
	for i := range pods.(*corev1.PodList).Items {
		podObjs = append(podObjs, &pods.(*corev1.PodList).Items[i])
	}
	for i := range claims.(*corev1.PersistentVolumeClaimList).Items {
		claimObjs = append(claimObjs, &claims.(*corev1.PersistentVolumeClaimList).Items[i])
	}
	if err := s.pods.Replace(podObjs, ""); err != nil {
		return err
	}
	return s.claims.Replace(claimObjs, "")
}

// collectGarbage is the garbage collector's rule: an object with owner
// references is deleted gcLag after none of its owners exists any more.
// Pods go first, so that claims owned by pods go in a later pass, as they
// would in a cluster. It reports whether deletions are pending.
func (s *sim) collectGarbage(ctx context.Context) (pending bool, err error) {
	if err := s.refresh(); err != nil {
		return false, err
	}
	live := map[types.UID]bool{}
	for uid := range s.others {
		live[uid] = true
	}
	for _, set := range s.sets {
		live[set.UID] = true
	}
	for _, o := range s.pods.List() {
		live[o.(*corev1.Pod).UID] = true
	}
	var deletes []func() error
	for _, o := range append(sortedObjects(s.pods.List()), sortedObjects(s.claims.List())...) {
		refs := o.GetOwnerReferences()
		if len(refs) == 0 || slices.ContainsFunc(refs, func(r metav1.OwnerReference) bool { return live[r.UID] }) {
			continue
		}
		var owners []string
		due := true
		for _, r := range refs {
			owners = append(owners, fmt.Sprintf("%s %s (uid %s)", r.Kind, r.Name, r.UID))
			since, ok := s.goneSince[r.UID]
			if !ok {
				since = s.clk.Now()
				s.goneSince[r.UID] = since
			}
			due = due && !s.clk.Now().Before(since.Add(gcLag))
		}
		if !due {
			pending = true
			continue
		}
		kind, del := "Pod", s.client.CoreV1().Pods(o.GetNamespace()).Delete
		if _, ok := o.(*corev1.PersistentVolumeClaim); ok {
			kind, del = "Claim", s.client.CoreV1().PersistentVolumeClaims(o.GetNamespace()).Delete
		}
		name, uid := o.GetName(), o.GetUID()
		deletes = append(deletes, func() error {
			s.printf("gc", "deletes %s %s (uid %s): its owner %s is gone", kind, name, uid, strings.Join(owners, ", "))
			return del(ctx, name, metav1.DeleteOptions{})
		})
	}
	for _, d := range deletes {
		if err := d(); err != nil {
			return false, err
		}
	}
	return pending || len(deletes) > 0, nil
}

func sortedObjects(objs []any) []metav1.Object {
	out := make([]metav1.Object, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(metav1.Object))
	}
	slices.SortFunc(out, func(a, b metav1.Object) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out
}

func (s *sim) scale(name string, n int32) {
	s.sets[name].Spec.Replicas = &n
	s.sets[name].Generation++
}

// claimUIDs returns the UIDs of the set's claims data-<set>-<ordinal> by
// ordinal, as the caches have them now.
func (s *sim) claimUIDs(set string) map[int]types.UID {
	out := map[int]types.UID{}
	for i := range 3 {
		if o, ok, _ := s.claims.GetByKey(scenarioNamespace + "/" + api.ClaimName("data", set, i)); ok {
			out[i] = o.(*corev1.PersistentVolumeClaim).UID
		}
	}
	return out
}

// kept says which of the claims in before still exist.
func (s *sim) kept(set string, before map[int]types.UID) string {
	now := s.claimUIDs(set)
	var kept, gone []string
	for i := range 3 {
		if uid, ok := before[i]; ok && now[i] == uid {
			kept = append(kept, fmt.Sprint(i))
		} else if ok {
			gone = append(gone, fmt.Sprint(i))
		}
	}
	switch {
	case len(gone) == 0:
		return "all kept"
	case len(kept) == 0:
		return "all deleted"
	}
	return strings.Join(kept, " ") + " kept, " + strings.Join(gone, " ") + " deleted"
}

// reused says which claims of ordinals 1 and 2 are the ones from before the
// scale-down (same UID) and which are fresh.
func (s *sim) reused(set string, before map[int]types.UID) string {
	now := s.claimUIDs(set)
	var reused, fresh []string
	for _, i := range []int{1, 2} {
		if now[i] == before[i] {
			reused = append(reused, fmt.Sprint(i))
		} else {
			fresh = append(fresh, fmt.Sprint(i))
		}
	}
	if len(fresh) == 0 {
		return strings.Join(reused, " ") + " reused"
	}
	if len(reused) == 0 {
		return strings.Join(fresh, " ") + " fresh"
	}
	return strings.Join(reused, " ") + " reused, " + strings.Join(fresh, " ") + " fresh"
}

// claimsOf lists the claims of a set with their UIDs and owners.
func (s *sim) claimsOf(set string) string {
	var parts []string
	for _, o := range sortedObjects(s.claims.List()) {
		if !strings.HasPrefix(o.GetName(), "data-"+set+"-") {
			continue
		}
		owners := refsString(o.GetOwnerReferences())
		if owners == "" {
			owners = "no owner"
		}
		parts = append(parts, fmt.Sprintf("%s (uid %s, %s)", o.GetName(), o.GetUID(), owners))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

func (s *sim) uid(prefix string) types.UID {
	s.uids[prefix]++
	return types.UID(fmt.Sprintf("%s%02d", prefix, s.uids[prefix]))
}

func (s *sim) printf(who, format string, args ...any) {
	fmt.Fprintf(s.out, "%s  %-15s %s\n", s.clk.Now().Format(time.TimeOnly), who, fmt.Sprintf(format, args...))
}

func policyField(set *api.ReplicatedSet) string {
	if p := set.Spec.PersistentVolumeClaimRetentionPolicy; p != nil {
		return fmt.Sprintf("persistentVolumeClaimRetentionPolicy {whenDeleted: %s, whenScaled: %s}", p.WhenDeleted, p.WhenScaled)
	}
	return "persistentVolumeClaimDeletePolicy: " + set.Spec.PersistentVolumeClaimDeletePolicy
}

// simStatus writes a set's status into the simulated API server.
type simStatus struct{ s *sim }

func (st simStatus) UpdateStatus(_ context.Context, set *api.ReplicatedSet) error {
	if cur, ok := st.s.sets[set.Name]; ok {
		cur.Status = set.Status
	}
	return nil
}
