package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/groundskeeper-io/groundskeeper/crt/claims"
	"github.com/groundskeeper-io/groundskeeper/examples/statefulset-pvc/api"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// The scenario plays the controller's reconcile against a simulated API
// server: controller-runtime's fake client for sets, pods and claims (with
// UIDs added on create), read directly where the manager would read its
// cache, and a tiny garbage collector that deletes an object once every
// owner it refers to is gone. It is a demo: the e2e test runs the same
// controller on a manager against a real API server and controller
// manager.
var scenarioStart = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

const scenarioNamespace = "demo"

type sim struct {
	out    io.Writer
	clk    *clocktesting.FakeClock
	client client.Client
	others map[types.UID]string // live objects of other kinds that own claims
	r      *reconciler
	uids   map[string]int
	writes int // to pods and claims
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
		others: map[types.UID]string{},
		uids:   map[string]int{},

		goneSince: map[types.UID]time.Time{},
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := api.AddToScheme(scheme); err != nil {
		return err
	}
	podOrClaim := func(obj client.Object) bool {
		switch obj.(type) {
		case *corev1.Pod, *corev1.PersistentVolumeClaim:
			return true
		}
		return false
	}
	fakeServer := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&api.ReplicatedSet{}).Build()
	s.client = interceptor.NewClient(fakeServer, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			// The fake gives created objects no UID; the API server would.
			switch obj.(type) {
			case *corev1.Pod:
				obj.SetUID(s.uid("p"))
			case *corev1.PersistentVolumeClaim:
				obj.SetUID(s.uid("c"))
			}
			if podOrClaim(obj) {
				s.writes++
			}
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if podOrClaim(obj) {
				s.writes++
			}
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if podOrClaim(obj) {
				s.writes++
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if podOrClaim(obj) {
				s.writes++
			}
			return c.Delete(ctx, obj, opts...)
		},
	})
	events := lifecycle.EventFunc(func(obj runtime.Object, eventtype, reason, msg string) {
		name := ""
		switch o := obj.(type) {
		case *corev1.ObjectReference:
			name = o.Name
		case client.Object:
			name = o.GetName()
		}
		if eventtype == corev1.EventTypeWarning {
			reason = "Warning " + reason
		}
		s.printf(name, "%s: %s", reason, msg)
	})
	m, err := lifecycle.New(lifecycle.Config{Client: claims.Client(s.client, s.client), Recorder: events, Clock: s.clk})
	if err != nil {
		return err
	}
	s.r = &reconciler{Client: s.client, m: m, events: simEvents{events},
		sets: claims.Sets[*api.ReplicatedSet]{Client: s.client, APIReader: s.client, GVK: api.GroupVersionKind, Spec: specOf, Label: api.SetLabel}}

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
		if err := s.user(ctx, setName, fmt.Sprintf("creates ReplicatedSet %s, 3 replicas, %s", setName, policyField(set)), func() error {
			return s.client.Create(ctx, set)
		}); err != nil {
			return err
		}
		before := s.claimUIDs(setName)
		if err := s.user(ctx, setName, "scales "+setName+" to 1", func() error { return s.scale(ctx, setName, 1) }); err != nil {
			return err
		}
		r.scaledDown = s.kept(setName, before)
		if err := s.user(ctx, setName, "scales "+setName+" back to 3", func() error { return s.scale(ctx, setName, 3) }); err != nil {
			return err
		}
		r.scaledUp = s.reused(setName, before)
		before = s.claimUIDs(setName)
		if err := s.user(ctx, setName, "deletes ReplicatedSet "+setName, func() error { return s.deleteSet(ctx, setName) }); err != nil {
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
	if err := s.user(ctx, "quick", "creates ReplicatedSet quick, 2 replicas, persistentVolumeClaimDeletePolicy: DeleteOnScaledownOnly", func() error {
		return s.client.Create(ctx, &api.ReplicatedSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: scenarioNamespace, Name: "quick", UID: s.uid("s"), Generation: 1},
			Spec: api.ReplicatedSetSpec{
				Replicas:                          ptr.To(int32(2)),
				Template:                          api.PodTemplate{Image: "registry.example/db:1"},
				VolumeClaimTemplates:              []api.ClaimTemplate{{Name: "data", Size: resource.MustParse("1Gi")}},
				PersistentVolumeClaimDeletePolicy: string(lifecycle.DeleteOnScaledownOnly),
			},
		})
	}); err != nil {
		return err
	}
	if err := s.userGC(ctx, "quick", "scales quick to 1", func() error { return s.scale(ctx, "quick", 1) }, false); err != nil {
		return err
	}
	if err := s.user(ctx, "quick", "scales quick back to 2", func() error { return s.scale(ctx, "quick", 2) }); err != nil {
		return err
	}
	return s.user(ctx, "quick", "deletes ReplicatedSet quick", func() error { return s.deleteSet(ctx, "quick") })
}

// conflict: a claim that another controller controls keeps its controller,
// whatever the set's policy.
func (s *sim) conflict(ctx context.Context) error {
	fmt.Fprintf(s.out, "\n== A claim controlled by another object: set %q, DeleteOnScaledownAndOwnerDeletion\n\n", "shared")
	s.clk.SetTime(scenarioStart.Add(5 * time.Hour))
	backup := s.uid("b")
	s.others[backup] = "Backup nightly"
	s.printf("user", "creates claim data-shared-0, controlled by Backup nightly (uid %s)", backup)
	if err := s.client.Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Name: "data-shared-0", Namespace: scenarioNamespace,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "backup.example/v1", Kind: "Backup", Name: "nightly", UID: backup, Controller: ptr.To(true)}},
	}}); err != nil {
		return err
	}
	if err := s.user(ctx, "shared", "creates ReplicatedSet shared, 1 replica, persistentVolumeClaimDeletePolicy: DeleteOnScaledownAndOwnerDeletion", func() error {
		return s.client.Create(ctx, &api.ReplicatedSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: scenarioNamespace, Name: "shared", UID: s.uid("s"), Generation: 1},
			Spec: api.ReplicatedSetSpec{
				Replicas:                          ptr.To(int32(1)),
				Template:                          api.PodTemplate{Image: "registry.example/db:1"},
				VolumeClaimTemplates:              []api.ClaimTemplate{{Name: "data", Size: resource.MustParse("1Gi")}},
				PersistentVolumeClaimDeletePolicy: string(lifecycle.DeleteOnScaledownAndOwnerDeletion),
			},
		})
	}); err != nil {
		return err
	}
	return s.user(ctx, "shared", "deletes ReplicatedSet shared", func() error { return s.deleteSet(ctx, "shared") })
}

// user applies a change, lets the controller and the garbage collector run
// until nothing changes, and prints the claims of the set.
func (s *sim) user(ctx context.Context, set, what string, change func() error) error {
	return s.userGC(ctx, set, what, change, true)
}

// userGC is user; with waitGC false it returns once the controller has
// nothing to do, even if the garbage collector still has.
func (s *sim) userGC(ctx context.Context, set, what string, change func() error, waitGC bool) error {
	s.printf("user", "%s", what)
	if err := change(); err != nil {
		return err
	}
	for pass := 0; ; pass++ {
		if pass == 30 {
			return errors.New("scenario: the controller did not settle after 30 passes")
		}
		s.clk.Step(time.Second)
		writes := s.writes
		var sets api.ReplicatedSetList
		if err := s.client.List(ctx, &sets, client.InNamespace(scenarioNamespace)); err != nil {
			return err
		}
		slices.SortFunc(sets.Items, func(a, b api.ReplicatedSet) int { return strings.Compare(a.Name, b.Name) })
		for i := range sets.Items {
			if err := s.r.reconcile(ctx, &sets.Items[i]); err != nil {
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

// list returns the pods or the claims of the namespace, sorted by name.
func (s *sim) list(ctx context.Context, list client.ObjectList) ([]client.Object, error) {
	if err := s.client.List(ctx, list, client.InNamespace(scenarioNamespace)); err != nil {
		return nil, err
	}
	var out []client.Object
	switch l := list.(type) {
	case *corev1.PodList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.PersistentVolumeClaimList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	}
	slices.SortFunc(out, func(a, b client.Object) int { return strings.Compare(a.GetName(), b.GetName()) })
	return out, nil
}

// collectGarbage is the garbage collector's rule: an object with owner
// references is deleted gcLag after none of its owners exists any more.
// Pods go first, so that claims owned by pods go in a later pass, as they
// would in a cluster. It reports whether deletions are pending.
func (s *sim) collectGarbage(ctx context.Context) (pending bool, err error) {
	var sets api.ReplicatedSetList
	if err := s.client.List(ctx, &sets, client.InNamespace(scenarioNamespace)); err != nil {
		return false, err
	}
	pods, err := s.list(ctx, &corev1.PodList{})
	if err != nil {
		return false, err
	}
	claims, err := s.list(ctx, &corev1.PersistentVolumeClaimList{})
	if err != nil {
		return false, err
	}
	live := map[types.UID]bool{}
	for uid := range s.others {
		live[uid] = true
	}
	for _, set := range sets.Items {
		live[set.UID] = true
	}
	for _, o := range pods {
		live[o.GetUID()] = true
	}
	var deletes []func() error
	for _, o := range append(pods, claims...) {
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
		kind := "Pod"
		if _, ok := o.(*corev1.PersistentVolumeClaim); ok {
			kind = "Claim"
		}
		deletes = append(deletes, func() error {
			s.printf("gc", "deletes %s %s (uid %s): its owner %s is gone", kind, o.GetName(), o.GetUID(), strings.Join(owners, ", "))
			return s.client.Delete(ctx, o, client.Preconditions{UID: ptr.To(o.GetUID())})
		})
	}
	for _, d := range deletes {
		if err := d(); err != nil {
			return false, err
		}
	}
	return pending || len(deletes) > 0, nil
}

// scale sets spec.replicas, as the scale subresource does.
func (s *sim) scale(ctx context.Context, name string, n int32) error {
	var set api.ReplicatedSet
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: scenarioNamespace, Name: name}, &set); err != nil {
		return err
	}
	set.Spec.Replicas = &n
	set.Generation++ // the API server would
	return s.client.Update(ctx, &set)
}

func (s *sim) deleteSet(ctx context.Context, name string) error {
	return s.client.Delete(ctx, &api.ReplicatedSet{ObjectMeta: metav1.ObjectMeta{Namespace: scenarioNamespace, Name: name}})
}

// claimUIDs returns the UIDs of the set's claims data-<set>-<ordinal> by
// ordinal.
func (s *sim) claimUIDs(set string) map[int]types.UID {
	out := map[int]types.UID{}
	for i := range 3 {
		var c corev1.PersistentVolumeClaim
		if err := s.client.Get(context.Background(), client.ObjectKey{Namespace: scenarioNamespace, Name: lifecycle.ClaimName("data", set, i)}, &c); err == nil {
			out[i] = c.UID
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
	claims, err := s.list(context.Background(), &corev1.PersistentVolumeClaimList{})
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, o := range claims {
		if !strings.HasPrefix(o.GetName(), "data-"+set+"-") {
			continue
		}
		var refs []string
		for _, r := range o.GetOwnerReferences() {
			ref := r.Kind + " " + r.Name
			if r.Controller != nil && *r.Controller {
				ref += " (controller)"
			}
			refs = append(refs, ref)
		}
		owners := strings.Join(refs, ", ")
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

// simEvents prints the controller's events as lifecycle's.
type simEvents struct{ print lifecycle.EventFunc }

func (e simEvents) Eventf(regarding, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	e.print(regarding, eventtype, reason, fmt.Sprintf(note, args...))
}
