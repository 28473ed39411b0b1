package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/groundskeeper-io/groundskeeper/examples/internal/chaos"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/kubecmd"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/replicatest"
	"github.com/groundskeeper-io/groundskeeper/examples/statefulset-pvc/api"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv/faultproxy"
)

// The statefulset-pvc chaos workload: two replicas of the controller with
// leader election, a generator that creates ReplicatedSets under each of
// the four claim retention policies, scales them up and down, deletes
// pods by hand, deletes sets and creates pods the controller did not make
// ("backup" pods) that mount a claim for a while, and the ground truth it
// records outside the system under test for the checker.
//
// Ground truth is ordered by etcd revision, not by the clock. Every
// resourceVersion this control plane hands out is the revision of its one
// etcd, shared by all resources, so the revision of a scale (the Scale
// answer's resourceVersion) and of a pod's or claim's deletion request (the
// first version seen with a deletionTimestamp; a pod deleted at once, off
// nodes, has none, and the watch's DELETED event carries its deletion's
// revision) say exactly which came first. A deletion is judged at its
// request, not at its removal: on a node a deleted pod terminates for its
// grace period, or for as long as its node does not answer, and a scale-up
// written meanwhile must not make its deletion look wrong. Kubernetes calls resourceVersions opaque; this checker relies on
// the implementation it tests against, and says so here. Where a revision
// is not known exactly (a write retried after an ambiguous failure, a
// deletion found by a relist), it is an interval and the checker reports
// only what every point of the interval breaks.

// spWorld is where the workload runs.
type spWorld struct {
	direct *rest.Config // the test's own: no faults
	ns     string
	// replicaConfig is the API server config of replica slot i, and the
	// proxy it goes through (nil: no faults on it).
	replicaConfig func(i int) (*rest.Config, *faultproxy.Proxy)
	// auditLog is the API server's audit log (testenv's isolated control
	// plane writes one), or "": every pod and claim deletion request, which
	// the watches can miss.
	auditLog string
	// storageClass, when set, is the class of the claims: a volume pool's
	// (testenv.Kubernetes.NewVolumePool), on nodes, where pods run and a
	// deleted pod terminates for podGrace seconds, or for as long as its
	// node does not answer, its claims mounted.
	storageClass string
	podGrace     int64
}

// spOptions tune the workload; the zero value is the real thing.
type spOptions struct {
	// bound is the liveness bound: how long after the faults stopped a
	// claim the policy deletes may still exist.
	bound time.Duration
	// wrap, if set, wraps the replicas' client: a planted bug.
	wrap func(client.WithWatch) client.Client
	// blindClaimWatch, a planted checker defect, hides every claim deletion
	// the watch saw: only the audit log can tell them.
	blindClaimWatch bool
	// process, when set, runs the replicas as processes of the example's
	// binary (as main wires it), which a kill ends with SIGKILL.
	process *chaos.Process
	log     logr.Logger
	// mountRace is how long a pod must have existed before a claim's
	// deletion request for the checker to report the deletion as made
	// while the pod mounted the claim (chaos.MountLog.Covering): the
	// longest a replica's request can be held on its way by a fault.
	mountRace time.Duration
}

// revs is a revision interval [lo, hi]: the event happened at one
// revision in it. hi == 0 means unbounded above.
type revs struct{ lo, hi uint64 }

// exact reports whether the revision is known exactly.
func (r revs) exact() bool { return r.lo == r.hi && r.hi != 0 }

// mayPrecede reports whether the event may have happened before revision
// x (0: no bound).
func (r revs) mayPrecede(x uint64) bool { return x == 0 || r.lo < x }

func (r revs) String() string {
	switch {
	case r.exact():
		return strconv.FormatUint(r.lo, 10)
	case r.hi == 0:
		return fmt.Sprintf("(%d, ∞)", r.lo)
	}
	return fmt.Sprintf("[%d, %d]", r.lo, r.hi)
}

// specEvent is one write of the generator to a set's spec.
type specEvent struct {
	kind     string // "create", "scale" or "delete"
	replicas int    // create and scale
	sent     time.Time
	at       revs
}

// setTruth is what the generator did to one set.
type setTruth struct {
	name   string
	uid    types.UID
	policy lifecycle.Policy
	events []specEvent // in order; create first, delete (if any) last
	// minReplicas is the fewest replicas the set has had: ordinals below
	// it were never out of range, so a pod of theirs never was condemned
	// and its claims never carried its reference.
	minReplicas int
}

// deleted returns the set's deletion, or nil while it exists.
func (s *setTruth) deleted() *specEvent {
	if e := &s.events[len(s.events)-1]; e.kind == "delete" {
		return e
	}
	return nil
}

// replicas is the set's spec.replicas after the generator's last write.
func (s *setTruth) replicas() int {
	for _, e := range slices.Backward(s.events) {
		if e.kind != "delete" {
			return e.replicas
		}
	}
	return 0
}

// valuesDuring returns the spec.replicas values that may have been in
// force at some revision of r (after a deletion, the last one stays: a
// pod the garbage collector deletes then was condemned by it or not).
func (s *setTruth) valuesDuring(r revs) []int {
	var sized []specEvent
	for _, e := range s.events {
		if e.kind != "delete" {
			sized = append(sized, e)
		}
	}
	var out []int
	for k, e := range sized {
		if r.hi != 0 && e.at.lo > r.hi {
			break
		}
		if k+1 == len(sized) || sized[k+1].at.hi == 0 || sized[k+1].at.hi > r.lo {
			out = append(out, e.replicas)
		}
	}
	return out
}

// mayBeUnwanted reports whether ordinal i may have been out of range at
// some revision of r: a scale to i or fewer in force, or the set deleted.
func (s *setTruth) mayBeUnwanted(i int, r revs) bool {
	if d := s.deleted(); d != nil && d.at.mayPrecede(r.hi) {
		return true
	}
	return slices.ContainsFunc(s.valuesDuring(r), func(v int) bool { return v <= i })
}

// mayBeScaledBelow is mayBeUnwanted without the set's deletion: whether a
// scale-down made ordinal i condemned at some revision of r.
func (s *setTruth) mayBeScaledBelow(i int, r revs) bool {
	return slices.ContainsFunc(s.valuesDuring(r), func(v int) bool { return v <= i })
}

// scaledBelowSince reports whether a scale to i or fewer may have been
// written after revision from.
func (s *setTruth) scaledBelowSince(i int, from uint64) bool {
	for _, e := range s.events {
		if e.kind == "scale" && e.replicas <= i && (e.at.hi == 0 || e.at.hi > from) {
			return true
		}
	}
	return false
}

// objTruth is what the audit's informers saw of one pod or claim (by UID).
type objTruth struct {
	uid     types.UID
	name    string
	set     string
	ordinal int
	// firstRV is the first resourceVersion seen; maxLiveRV the highest
	// seen without a deletionTimestamp; termRV the first seen with one
	// (the deletion request's revision, or later when the watch missed
	// it), at termSeen.
	firstRV, maxLiveRV, termRV, maxRV uint64
	firstSeen, termSeen               time.Time
	owners                            []metav1.OwnerReference // last seen
	// claims are the claims a pod's volumes name: the claims it mounts.
	claims []string
}

// observer records every version of the pods and claims its informer
// sees; the checker reads revisions and owners from it.
type observer struct {
	mu   sync.Mutex
	objs map[types.UID]*objTruth
	kind string // "pod" or "claim"
}

func (o *observer) handler() toolscache.ResourceEventHandlerFuncs {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { o.see(obj) },
		UpdateFunc: func(_, obj any) { o.see(obj) },
	}
}

func (o *observer) see(obj any) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	rv, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	o.mu.Lock()
	defer o.mu.Unlock()
	t := o.objs[m.GetUID()]
	if t == nil {
		t = &objTruth{uid: m.GetUID(), name: m.GetName(), firstRV: rv, firstSeen: time.Now(), ordinal: -1}
		t.set, t.ordinal = parseMember(o.kind, m.GetName())
		if p, ok := obj.(*corev1.Pod); ok {
			for _, v := range p.Spec.Volumes {
				if v.PersistentVolumeClaim != nil {
					t.claims = append(t.claims, v.PersistentVolumeClaim.ClaimName)
				}
			}
		}
		o.objs[m.GetUID()] = t
	}
	t.maxRV = max(t.maxRV, rv)
	if m.GetDeletionTimestamp() == nil {
		t.maxLiveRV = max(t.maxLiveRV, rv)
	} else if t.termRV == 0 {
		t.termRV, t.termSeen = rv, time.Now()
	}
	t.owners = m.GetOwnerReferences()
}

func (o *observer) get(uid types.UID) *objTruth {
	o.mu.Lock()
	defer o.mu.Unlock()
	if t := o.objs[uid]; t != nil {
		c := *t
		return &c
	}
	return nil
}

func (o *observer) all() []objTruth {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []objTruth
	for _, t := range o.objs {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b objTruth) int { return cmp.Compare(a.firstRV, b.firstRV) })
	return out
}

// parseMember splits a pod name <set>-<ordinal> or a claim name
// data-<set>-<ordinal>. Set names have no dash.
func parseMember(kind, name string) (string, int) {
	if kind == "claim" {
		var ok bool
		if name, ok = strings.CutPrefix(name, claimTemplate+"-"); !ok {
			return "", -1
		}
	}
	set, n, ok := strings.Cut(name, "-")
	if !ok {
		return "", -1
	}
	i, err := strconv.Atoi(n)
	if err != nil {
		return "", -1
	}
	return set, i
}

// write is one write of the generator, for bounding revisions by time.
type write struct {
	sent time.Time
	rv   uint64
}

// truth is what the generator did.
type truth struct {
	mu      sync.Mutex
	sets    map[string]*setTruth
	order   []string
	manual  map[types.UID]time.Time // pods the generator deleted by hand
	foreign []*foreignPod
	// foreignUIDs are the foreign pods' UIDs: the generator deletes them.
	foreignUIDs map[types.UID]bool
	writes      []write
	stopped     time.Time
}

// lastRV is the highest revision the generator's completed writes got: a
// write sent now gets a higher one.
func (t *truth) lastRV() uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var rv uint64
	for _, w := range t.writes {
		rv = max(rv, w.rv)
	}
	return rv
}

// rvAfter is the lowest revision of a write sent after at: whatever was
// done by at has a lower revision. 0: none.
func (t *truth) rvAfter(at time.Time) uint64 {
	var rv uint64
	for _, w := range t.writes {
		if w.sent.After(at) && (rv == 0 || w.rv < rv) {
			rv = w.rv
		}
	}
	return rv
}

const claimTemplate = "data"

// foreignPod is a pod the controller did not make that mounts a claim for
// a while: a backup of a replica's data, or someone inspecting the data
// a scale-down left.
type foreignPod struct {
	name  string
	claim string
	until time.Time // when the generator deletes it
	gone  bool      // its delete was sent
}

type spWorkload struct {
	w                    spWorld
	o                    spOptions
	seed                 uint64
	truth                truth
	podAudit, claimAudit *chaos.DeleteAudit
	pods, claims         *observer
	// mounts are the foreign pods' mounts, with their UIDs: on nodes a
	// deleted one mounts its claim until it is gone (Track).
	mounts   chaos.MountLog
	cl       client.Client // direct
	kc       kubernetes.Interface
	replicas *chaos.Replicas
	// leniency counts the deletions the checker could judge only
	// leniently (revision intervals, owners): the summary shows them.
	leniency map[string]int
	// audited counts, from the audit log, the deletion requests of pods
	// and claims, and those the watches missed (set by check).
	audited map[string]int
}

// newSPWorkload starts the audits and observers, before anything is
// created.
func newSPWorkload(ctx context.Context, w spWorld, o spOptions, seed uint64) (*spWorkload, error) {
	cl, err := clientFor(w.direct)
	if err != nil {
		return nil, err
	}
	kc, err := kubernetes.NewForConfig(w.direct)
	if err != nil {
		return nil, err
	}
	g := &spWorkload{w: w, o: o, seed: seed, cl: cl, kc: kc, leniency: map[string]int{}, audited: map[string]int{},
		truth:  truth{sets: map[string]*setTruth{}, manual: map[types.UID]time.Time{}, foreignUIDs: map[types.UID]bool{}},
		pods:   &observer{objs: map[types.UID]*objTruth{}, kind: "pod"},
		claims: &observer{objs: map[types.UID]*objTruth{}, kind: "claim"},
	}
	g.replicas = &chaos.Replicas{N: 2, Config: w.replicaConfig, Run: g.runManager, Log: o.log}
	if o.process != nil {
		g.replicas.Run = o.process.Run
	}
	// Informers on the test's own connection: their relists after an API
	// server restart report the deletions their watch missed.
	factory := informers.NewSharedInformerFactoryWithOptions(kc, 0, informers.WithNamespace(w.ns))
	podInf := factory.Core().V1().Pods().Informer()
	claimInf := factory.Core().V1().PersistentVolumeClaims().Informer()
	if g.podAudit, err = chaos.AuditDeletes(podInf); err != nil {
		return nil, err
	}
	if g.claimAudit, err = chaos.AuditDeletes(claimInf); err != nil {
		return nil, err
	}
	if _, err := podInf.AddEventHandler(g.pods.handler()); err != nil {
		return nil, err
	}
	if _, err := claimInf.AddEventHandler(g.claims.handler()); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), podInf.HasSynced, claimInf.HasSynced) {
		return nil, errors.New("audit informers did not sync")
	}
	if w.storageClass != "" {
		// On nodes a deleted pod mounts its claim until it is gone.
		go g.mounts.Track(ctx, kc.CoreV1().Pods(w.ns), 250*time.Millisecond)
	}
	return g, nil
}

// policies are the four combinations, each written in one of the two
// forms of the spec in turn.
var policies = []lifecycle.Policy{
	{WhenDeleted: lifecycle.ActionRetain, WhenScaled: lifecycle.ActionRetain},
	{WhenDeleted: lifecycle.ActionDelete, WhenScaled: lifecycle.ActionRetain},
	{WhenDeleted: lifecycle.ActionRetain, WhenScaled: lifecycle.ActionDelete},
	{WhenDeleted: lifecycle.ActionDelete, WhenScaled: lifecycle.ActionDelete},
}

// generate creates, scales and deletes sets, deletes pods by hand and
// mounts claims from foreign pods until ctx ends, then deletes the foreign
// pods left.
func (g *spWorkload) generate(ctx context.Context, ops *chaos.Ops) (err error) {
	rng := rand.New(rand.NewPCG(g.seed, 0x737470)) // "stp"
	// The foreign pods draw from a stream of their own: the rest of the
	// workload is what it was without them.
	frng := rand.New(rand.NewPCG(g.seed, 0x626b70)) // "bkp"
	defer func() {
		if e := g.unmountForeign(ops, true); err == nil {
			err = e
		}
		g.truth.mu.Lock()
		g.truth.stopped = time.Now()
		g.truth.mu.Unlock()
	}()
	for ctx.Err() == nil {
		if err := g.unmountForeign(ops, false); err != nil {
			return err
		}
		live := g.liveSets()
		if err := g.mountForeign(frng, live, ops); err != nil {
			return err
		}
		var err error
		switch n := rng.IntN(20); {
		case len(live) < 4 || (n < 2 && len(live) < 8):
			err = g.createSet(rng, ops)
		case n < 4 && len(live) >= 5:
			err = g.deleteSet(live[rng.IntN(len(live))], ops)
		case n < 6:
			err = g.deletePodByHand(rng, live, ops)
		default:
			err = g.scaleSet(rng, live[rng.IntN(len(live))], ops)
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(150+rng.IntN(350)) * time.Millisecond):
		}
	}
	return nil
}

func (g *spWorkload) liveSets() []*setTruth {
	g.truth.mu.Lock()
	defer g.truth.mu.Unlock()
	var out []*setTruth
	for _, name := range g.truth.order {
		if s := g.truth.sets[name]; s.deleted() == nil {
			out = append(out, s)
		}
	}
	return out
}

// record adds a write's outcome to the set's events and the write log. An
// answer after retries leaves the revision uncertain: any after the last
// write completed before this one was sent.
func (g *spWorkload) record(s *setTruth, e specEvent, rv uint64, attempts int, floor uint64) {
	e.at = revs{lo: rv, hi: rv}
	if attempts > 1 {
		e.at.lo = floor + 1
	}
	g.truth.mu.Lock()
	defer g.truth.mu.Unlock()
	s.events = append(s.events, e)
	g.truth.writes = append(g.truth.writes, write{sent: e.sent, rv: rv})
}

func (g *spWorkload) createSet(rng *rand.Rand, ops *chaos.Ops) error {
	g.truth.mu.Lock()
	n := len(g.truth.order)
	g.truth.mu.Unlock()
	p := policies[n%len(policies)]
	replicas := 1 + rng.IntN(3)
	templates := setSpec(0).VolumeClaimTemplates
	if g.w.storageClass != "" {
		for i := range templates {
			templates[i].StorageClassName = &g.w.storageClass
		}
	}
	spec := api.ReplicatedSetSpec{
		Replicas:             ptr.To(int32(replicas)),
		Template:             api.PodTemplate{Image: "registry.example/db:1", TerminationGracePeriodSeconds: g.podGrace()},
		VolumeClaimTemplates: templates,
	}
	if (n/len(policies))%2 == 0 {
		spec.PersistentVolumeClaimRetentionPolicy = &api.RetentionPolicy{WhenDeleted: string(p.WhenDeleted), WhenScaled: string(p.WhenScaled)}
	} else {
		name, _ := p.Name()
		spec.PersistentVolumeClaimDeletePolicy = string(name)
	}
	s := &setTruth{name: fmt.Sprintf("s%d", n), policy: p, minReplicas: replicas}
	floor, sent, attempts := g.truth.lastRV(), time.Now(), 0
	var got api.ReplicatedSet
	err := chaos.Retry(func(ctx context.Context) error {
		attempts++
		set := &api.ReplicatedSet{ObjectMeta: metav1.ObjectMeta{Namespace: g.w.ns, Name: s.name}, Spec: spec}
		err := g.cl.Create(ctx, set)
		if apierrors.IsAlreadyExists(err) {
			err = g.cl.Get(ctx, client.ObjectKeyFromObject(set), set)
		}
		got = *set
		return err
	})
	if err != nil {
		return fmt.Errorf("create set %s: %w", s.name, err)
	}
	s.uid = got.UID
	rv, _ := strconv.ParseUint(got.ResourceVersion, 10, 64)
	g.truth.mu.Lock()
	g.truth.sets[s.name] = s
	g.truth.order = append(g.truth.order, s.name)
	g.truth.mu.Unlock()
	g.record(s, specEvent{kind: "create", replicas: replicas, sent: sent}, rv, attempts, floor)
	name, _ := p.Name()
	ops.Add("create set (" + string(name) + ")")
	return nil
}

// scaleSet sets spec.replicas to 0 to 4 through the scale subresource, as
// kubectl scale does; 0 is rarer, so that ordinal 0 often keeps its claim
// for the whole run.
func (g *spWorkload) scaleSet(rng *rand.Rand, s *setTruth, ops *chaos.Ops) error {
	cur := s.replicas()
	to := 1 + rng.IntN(4)
	if rng.IntN(8) == 0 {
		to = 0
	}
	if to == cur {
		return nil
	}
	body := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, to)
	floor, sent, attempts := g.truth.lastRV(), time.Now(), 0
	var sc autoscalingv1.Scale
	err := chaos.Retry(func(ctx context.Context) error {
		attempts++
		set := &api.ReplicatedSet{ObjectMeta: metav1.ObjectMeta{Namespace: g.w.ns, Name: s.name}}
		sc = autoscalingv1.Scale{}
		return g.cl.SubResource("scale").Patch(ctx, set, client.RawPatch(types.MergePatchType, body), client.WithSubResourceBody(&sc))
	})
	if err != nil {
		return fmt.Errorf("scale set %s to %d: %w", s.name, to, err)
	}
	if sc.UID != s.uid || sc.Spec.Replicas != int32(to) {
		return fmt.Errorf("scale set %s to %d: the answer is uid %s, replicas %d", s.name, to, sc.UID, sc.Spec.Replicas)
	}
	rv, _ := strconv.ParseUint(sc.ResourceVersion, 10, 64)
	g.record(s, specEvent{kind: "scale", replicas: to, sent: sent}, rv, attempts, floor)
	g.truth.mu.Lock()
	s.minReplicas = min(s.minReplicas, to)
	g.truth.mu.Unlock()
	if to > cur {
		ops.Add("scale up")
	} else {
		ops.Add("scale down")
	}
	return nil
}

// deleteSet deletes a set (background cascade, the default), with its UID
// as a precondition. The raw request keeps the answer: the deleted object
// with the deletion's revision.
func (g *spWorkload) deleteSet(s *setTruth, ops *chaos.Ops) error {
	path := fmt.Sprintf("/apis/%s/namespaces/%s/%s/%s", api.GroupVersion.String(), g.w.ns, api.Resource, s.name)
	floor, sent, attempts := g.truth.lastRV(), time.Now(), 0
	var rv uint64
	err := chaos.Retry(func(ctx context.Context) error {
		attempts++
		raw, err := g.kc.CoreV1().RESTClient().Delete().AbsPath(path).
			Body(&metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.uid}}).Do(ctx).Raw()
		if apierrors.IsNotFound(err) {
			// An earlier attempt was applied: the revision is not known,
			// only that it came after floor and before now.
			rv = 0
			return nil
		}
		if err != nil {
			return err
		}
		var m metav1.PartialObjectMetadata
		if err := json.Unmarshal(raw, &m); err != nil {
			return err
		}
		rv, _ = strconv.ParseUint(m.ResourceVersion, 10, 64)
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete set %s: %w", s.name, err)
	}
	e := specEvent{kind: "delete", sent: sent}
	if rv == 0 {
		// Bounded above by a revision read now.
		var list api.ReplicatedSetList
		err := chaos.Retry(func(ctx context.Context) error { return g.cl.List(ctx, &list, client.InNamespace(g.w.ns)) })
		if err != nil {
			return fmt.Errorf("delete set %s: %w", s.name, err)
		}
		rv, _ = strconv.ParseUint(list.ResourceVersion, 10, 64)
		attempts = 2
	}
	g.record(s, e, rv, attempts, floor)
	ops.Add("delete set")
	return nil
}

// deletePodByHand deletes a pod whose ordinal was never out of range, as a
// user or a node drain does: the controller must bring it back on the
// same claims (KEP-1847 test plan, items 4 and 5).
func (g *spWorkload) deletePodByHand(rng *rand.Rand, live []*setTruth, ops *chaos.Ops) error {
	g.truth.mu.Lock()
	var cands []string
	for _, s := range live {
		for i := range s.minReplicas {
			cands = append(cands, api.PodName(s.name, i))
		}
	}
	g.truth.mu.Unlock()
	if len(cands) == 0 {
		return nil
	}
	name := cands[rng.IntN(len(cands))]
	var pod corev1.Pod
	err := chaos.Retry(func(ctx context.Context) error {
		return client.IgnoreNotFound(g.cl.Get(ctx, client.ObjectKey{Namespace: g.w.ns, Name: name}, &pod))
	})
	if err != nil || pod.UID == "" {
		return err
	}
	// Recorded before the request: the deletion may be seen before the
	// answer comes.
	g.truth.mu.Lock()
	g.truth.manual[pod.UID] = time.Now()
	g.truth.mu.Unlock()
	err = chaos.Retry(func(ctx context.Context) error {
		err := g.cl.Delete(ctx, &pod, client.Preconditions{UID: &pod.UID})
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("delete pod %s: %w", name, err)
	}
	ops.Add("delete pod by hand")
	return nil
}

// mountForeign, one time in two, creates a pod the controller did not
// make, labelled app=backup and without the set label, that mounts an
// existing claim for a while: two times in three the claim of a live set's
// highest ordinal in range (a backup of the replica a scale-down takes
// first) for 3 to 8 s, else any claim, in range or left by a scale-down,
// for 2 to 8 s.
func (g *spWorkload) mountForeign(rng *rand.Rand, live []*setTruth, ops *chaos.Ops) error {
	n := rng.IntN(6)
	if n >= 3 {
		return nil
	}
	if n < 2 && len(live) > 0 {
		s := live[rng.IntN(len(live))]
		if r := s.replicas(); r > 0 {
			claim := lifecycle.ClaimName(claimTemplate, s.name, r-1)
			return g.createForeign(claim, time.Duration(3000+rng.IntN(5000))*time.Millisecond, ops)
		}
		return nil
	}
	var claims *corev1.PersistentVolumeClaimList
	err := chaos.Retry(func(ctx context.Context) (err error) {
		claims, err = g.kc.CoreV1().PersistentVolumeClaims(g.w.ns).List(ctx, metav1.ListOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("list claims: %w", err)
	}
	var cands []string
	for _, c := range claims.Items {
		if c.DeletionTimestamp == nil {
			cands = append(cands, c.Name)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	slices.Sort(cands) // the list's order is not the seed's
	claim := cands[rng.IntN(len(cands))]
	return g.createForeign(claim, time.Duration(2000+rng.IntN(6000))*time.Millisecond, ops)
}

// createForeign creates a foreign pod, named backup-<claim>-<number>, that
// mounts claim for lasts. Its mount is recorded with its UID.
func (g *spWorkload) createForeign(claim string, lasts time.Duration, ops *chaos.Ops) error {
	g.truth.mu.Lock()
	f := &foreignPod{name: fmt.Sprintf("backup-%s-%d", claim, len(g.truth.foreign)), claim: claim}
	g.truth.foreign = append(g.truth.foreign, f)
	g.truth.mu.Unlock()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: f.name, Labels: map[string]string{"app": "backup"}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: g.podGrace(),
			Containers: []corev1.Container{{Name: "backup", Image: "registry.example/backup:1",
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: true}}}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim, ReadOnly: true}}}},
		},
	}
	m, err := g.mounts.CreatePod(g.kc.CoreV1().Pods(g.w.ns), pod, claim, true)
	if err != nil {
		return fmt.Errorf("foreign pod: %w", err)
	}
	g.truth.mu.Lock()
	f.until = m.From.Add(lasts)
	g.truth.foreignUIDs[m.UID] = true
	g.truth.mu.Unlock()
	ops.Add("foreign pod mounts claims")
	return nil
}

// podGrace is the pods' terminationGracePeriodSeconds, nil for the
// default (off nodes a deleted pod is gone at once).
func (g *spWorkload) podGrace() *int64 {
	if g.w.podGrace == 0 {
		return nil
	}
	return &g.w.podGrace
}

// unmountForeign deletes the foreign pods whose time is up, or all of them.
func (g *spWorkload) unmountForeign(ops *chaos.Ops, all bool) error {
	now := time.Now()
	g.truth.mu.Lock()
	var due []*foreignPod
	for _, f := range g.truth.foreign {
		if !f.gone && !f.until.IsZero() && (all || !now.Before(f.until)) {
			f.gone = true
			due = append(due, f)
		}
	}
	g.truth.mu.Unlock()
	for _, f := range due {
		if err := g.mounts.DeletePod(g.kc.CoreV1().Pods(g.w.ns), f.name, now); err != nil {
			return fmt.Errorf("foreign pod: %w", err)
		}
		ops.Add("foreign pod deleted")
	}
	return nil
}

// runManager runs one replica until ctx ends or it exits.
func (g *spWorkload) runManager(ctx context.Context, cfg *rest.Config, i int) error {
	flags := kubecmd.Flags{Namespace: g.w.ns, LeaderElect: true}
	mgr, err := newManager(cfg, &flags, controllerOptions{resync: time.Minute}, func(mo *manager.Options) {
		replicatest.CrashOptions(g.o.log.WithValues("replica", i))(mo)
		if g.o.wrap != nil {
			mo.NewClient = func(cfg *rest.Config, opts client.Options) (client.Client, error) {
				c, err := client.NewWithWatch(cfg, opts)
				if err != nil {
					return nil, err
				}
				return g.o.wrap(c), nil
			}
		}
	})
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// finalState is the namespace's sets, pods and claims, read fresh.
type finalState struct {
	sets   map[string]*api.ReplicatedSet
	pods   map[string]*corev1.Pod
	claims map[string]*corev1.PersistentVolumeClaim
	at     time.Time
}

func (g *spWorkload) read(ctx context.Context) (*finalState, error) {
	var sets api.ReplicatedSetList
	if err := g.cl.List(ctx, &sets, client.InNamespace(g.w.ns)); err != nil {
		return nil, err
	}
	pods, err := g.kc.CoreV1().Pods(g.w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	claims, err := g.kc.CoreV1().PersistentVolumeClaims(g.w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	f := &finalState{sets: map[string]*api.ReplicatedSet{}, pods: map[string]*corev1.Pod{},
		claims: map[string]*corev1.PersistentVolumeClaim{}, at: time.Now()}
	for i := range sets.Items {
		f.sets[sets.Items[i].Name] = &sets.Items[i]
	}
	for i := range pods.Items {
		f.pods[pods.Items[i].Name] = &pods.Items[i]
	}
	for i := range claims.Items {
		f.claims[claims.Items[i].Name] = &claims.Items[i]
	}
	return f, nil
}

// converged lists what is not yet as the spec and the policies say: each
// live set with exactly its spec'd pods, their claims, its status
// caught up, and no claim its policy deletes; each deleted set without
// pods, and without claims under whenDeleted: Delete.
// describeMeta says what decides an object's removal, for a liveness
// report: its UID, creation, owners, deletion timestamp and finalizers.
func describeMeta(o metav1.Object) string {
	var owners []string
	for _, r := range o.GetOwnerReferences() {
		owners = append(owners, fmt.Sprintf("%s/%s uid %s controller %v", r.Kind, r.Name, r.UID, r.Controller != nil && *r.Controller))
	}
	return fmt.Sprintf(" (uid %s, created %s, owners [%s], deletion %s, finalizers %v)",
		o.GetUID(), ts(o.GetCreationTimestamp().Time), strings.Join(owners, "; "), describeTime(o.GetDeletionTimestamp()), o.GetFinalizers())
}

func describeTime(t *metav1.Time) string {
	if t == nil {
		return "none"
	}
	return ts(t.Time)
}

// describePod says where a pod runs and how far it is in going: what
// the pvc-protection controller and the fake kubelet act on.
func describePod(p *corev1.Pod) string {
	grace := "none"
	if g := p.DeletionGracePeriodSeconds; g != nil {
		grace = fmt.Sprintf("%ds", *g)
	}
	return fmt.Sprintf(" [pod %s uid %s on node %q, phase %s, deletion %s, grace %s]",
		p.Name, p.UID, p.Spec.NodeName, p.Status.Phase, describeTime(p.DeletionTimestamp), grace)
}

// mountedBy describes the pods of the final read that mount claim: while
// one is scheduled and not shut down, the pvc-protection finalizer stays.
func mountedBy(f *finalState, claim string) string {
	var out []string
	for _, p := range f.pods {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim {
				out = append(out, describePod(p))
			}
		}
	}
	if len(out) == 0 {
		return " mounted by no pod"
	}
	slices.Sort(out)
	return " mounted by" + strings.Join(out, "")
}

func (g *spWorkload) converged(f *finalState) []string {
	g.truth.mu.Lock()
	defer g.truth.mu.Unlock()
	var out []string
	for _, name := range g.truth.order {
		s := g.truth.sets[name]
		r := s.replicas()
		deleted := s.deleted() != nil
		var pods, claims []int
		for _, p := range f.pods {
			if set, i := parseMember("pod", p.Name); set == name {
				pods = append(pods, i)
				if deleted || i >= r || p.DeletionTimestamp != nil {
					out = append(out, "pod "+p.Name+describeMeta(p)+describePod(p))
				}
			}
		}
		for _, c := range f.claims {
			set, i := parseMember("claim", c.Name)
			if set != name {
				continue
			}
			claims = append(claims, i)
			switch {
			case deleted && s.policy.DeletesOnOwnerDeletion():
				out = append(out, "claim "+c.Name+" of a deleted set"+describeMeta(c)+mountedBy(f, c.Name))
			case !deleted && i >= r && s.policy.DeletesOnScaledown() && !g.podlessClaim(s, c):
				out = append(out, "claim "+c.Name+" out of range"+describeMeta(c)+mountedBy(f, c.Name))
			case !deleted && i < r && c.DeletionTimestamp != nil:
				out = append(out, "claim "+c.Name+" terminating"+describeMeta(c)+mountedBy(f, c.Name))
			}
		}
		if deleted {
			continue
		}
		for i := range r {
			if !slices.Contains(pods, i) {
				out = append(out, "no pod "+api.PodName(name, i))
			}
			if !slices.Contains(claims, i) {
				out = append(out, "no claim "+lifecycle.ClaimName(claimTemplate, name, i))
			}
		}
		if set := f.sets[name]; set == nil || set.UID != s.uid {
			out = append(out, "set "+name+" missing")
		} else if set.Status.ObservedGeneration != set.Generation || int(set.Status.Replicas) != r {
			out = append(out, fmt.Sprintf("set %s status: generation %d observed %d, replicas %d of %d",
				name, set.Generation, set.Status.ObservedGeneration, set.Status.Replicas, r))
		}
	}
	slices.Sort(out)
	return out
}

// podlessClaim is podless for a claim of the final list; a claim the
// informer has not seen yet counts as having had a pod.
func (g *spWorkload) podlessClaim(s *setTruth, c *corev1.PersistentVolumeClaim) bool {
	o := g.claims.get(c.UID)
	return o != nil && g.podless(s, o)
}

// settled: every set is as its spec and policy say.
func (g *spWorkload) settled(ctx context.Context) error {
	f, err := g.read(ctx)
	if err != nil {
		return err
	}
	if p := g.converged(f); len(p) > 0 {
		return fmt.Errorf("%d not converged: %s", len(p), strings.Join(p[:min(len(p), 5)], ", "))
	}
	return nil
}
