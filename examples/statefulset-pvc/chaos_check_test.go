package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundskeeper-io/groundskeeper/examples/internal/chaos"
	"github.com/groundskeeper-io/groundskeeper/examples/statefulset-pvc/api"
)

// The invariants of the statefulset-pvc workload.
const (
	// Claims are deleted only as the policy says: none that Retain keeps,
	// none before a scale-down condemned its pod (whenScaled: Delete) or
	// the set's deletion was requested (whenDeleted: Delete), none whose
	// pod went while its ordinal was wanted.
	invClaimSafety = "safety (claims)"
	// No pod deletion is requested, except by hand, while its ordinal is
	// in range.
	invPodSafety = "safety (pods)"
	// No claim deletion is requested while a pod that mounts it may run
	// (it exists: on a node a deleted pod runs until it is gone, while it
	// terminates or its node does not answer), except by the garbage
	// collector: the policy's deletions go through owner references, and
	// the pvc-protection finalizer holds such a claim until its pods are
	// gone.
	invMounted = "no mounted claim deleted"
	// Every set reaches its spec'd pods and claims, and the claims its
	// policy deletes are gone, within the bound after the faults stopped.
	invLiveness = "liveness"
	// Every claim the policy keeps exists, with its original UID.
	invKept = "no data lost"
)

func ts(t time.Time) string { return t.Format("15:04:05.000") }

// raceWindow bounds how long before a pod's deletion request was seen a
// scale-up that overtook the controller's fresh read of the set may have
// been sent: the read, the pod's annotation and its delete, on a loaded
// machine.
const raceWindow = 15 * time.Second

func rvOf(obj any) uint64 {
	m, ok := obj.(metav1.Object)
	if !ok {
		return 0
	}
	rv, _ := strconv.ParseUint(m.GetResourceVersion(), 10, 64)
	return rv
}

// removal is the revision interval in which an audited object was
// removed: exactly the DELETED event's revision when the watch saw it
// (higher than any version seen before), else after the last version seen
// and before the first generator write sent after the relist found it
// gone.
func (g *spWorkload) removal(d chaos.Deletion, o *objTruth) revs {
	last := rvOf(d.Last)
	if o == nil || last > o.maxRV {
		return revs{lo: last, hi: last}
	}
	return revs{lo: o.maxRV + 1, hi: g.truth.rvAfter(d.Seen)}
}

// requested is the revision interval of a claim's deletion request: after
// the last version seen without a deletionTimestamp, by the first seen
// with one, else by its removal.
func (g *spWorkload) requested(d chaos.Deletion, o *objTruth) revs {
	r := g.removal(d, o)
	if o == nil {
		return revs{lo: 0, hi: r.hi}
	}
	if o.termRV != 0 {
		return revs{lo: o.maxLiveRV + 1, hi: o.termRV}
	}
	return revs{lo: o.maxLiveRV + 1, hi: r.hi}
}

// podRequested is the revision interval of a pod's deletion request, at
// which its deletion is judged: on a node a deleted pod terminates for its
// grace period, or for as long as its node does not answer, and a scale-up
// written meanwhile brings its ordinal back in range before its removal.
// After the last version seen without a deletionTimestamp, by the first
// seen with one. A pod whose removal the watch saw (exactly) without ever
// seeing it terminating was deleted at once (off nodes, or never
// scheduled): at its removal. Else (a relist missed its terminating
// versions) by its removal.
func (g *spWorkload) podRequested(d chaos.Deletion, o *objTruth) revs {
	r := g.removal(d, o)
	switch {
	case o == nil:
		return revs{lo: 0, hi: r.hi}
	case o.termRV != 0:
		return revs{lo: o.maxLiveRV + 1, hi: o.termRV}
	case r.exact():
		return r
	}
	return revs{lo: o.maxLiveRV + 1, hi: r.hi}
}

// requestSeen is when a pod's deletion request was seen: its first version
// with a deletionTimestamp, else its removal.
func (g *spWorkload) requestSeen(d chaos.Deletion) time.Time {
	if o := g.pods.get(d.UID); o != nil && !o.termSeen.IsZero() {
		return o.termSeen
	}
	return d.Seen
}

// createdAfter is a revision the claim was created after: its set's
// creation, or the removal of the claim of the same name before it (one
// name holds one claim at a time).
func (g *spWorkload) createdAfter(s *setTruth, c *objTruth) uint64 {
	from := s.events[0].at.lo
	for _, o := range g.claims.all() {
		if o.name == c.name && o.firstRV < c.firstRV {
			from = max(from, o.firstRV)
		}
	}
	for _, d := range g.claimAudit.Deletions() {
		if o := g.claims.get(d.UID); d.Name == c.name && d.UID != c.uid && o != nil && o.firstRV < c.firstRV {
			from = max(from, g.removal(d, o).lo)
		}
	}
	return from
}

// podless reports whether no pod of the claim's ordinal was created after
// the claim could have been: its pod's creation failed before the
// ordinal went out of range. No pod was condemned, so the claim never
// gets a pod reference and whenScaled: Delete keeps it, as the StatefulSet
// controller does (it fixes the claims of condemned pods only); the
// checker does not require it gone.
func (g *spWorkload) podless(s *setTruth, c *objTruth) bool {
	from := g.createdAfter(s, c)
	for _, p := range g.pods.all() {
		if p.name == api.PodName(c.set, c.ordinal) && p.firstRV > from {
			return false
		}
	}
	return true
}

func (s *setTruth) history() string {
	var parts []string
	for _, e := range s.events {
		switch e.kind {
		case "delete":
			parts = append(parts, fmt.Sprintf("delete@%s", e.at))
		default:
			parts = append(parts, fmt.Sprintf("%s %d@%s", e.kind, e.replicas, e.at))
		}
	}
	name, _ := s.policy.Name()
	return fmt.Sprintf("%s %s [%s]", s.name, name, strings.Join(parts, ", "))
}

// check compares what the audits saw, and what exists now, with the
// ground truth.
func (g *spWorkload) check(ctx context.Context) []chaos.Violation {
	var out []chaos.Violation
	add := func(inv, format string, args ...any) {
		out = append(out, chaos.Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...)})
	}
	var f *finalState
	err := chaos.Retry(func(ctx context.Context) (err error) {
		f, err = g.read(ctx)
		return err
	})
	if err != nil {
		add(invKept, "cannot read the final state: %v", err)
		return out
	}
	podDels, claimDels := g.podAudit.Deletions(), g.claimAudit.Deletions()
	if g.o.blindClaimWatch {
		claimDels = nil
	}
	// The liveness items come first: converged takes the truth's lock.
	for _, p := range g.converged(f) {
		add(invLiveness, "%s, %s after the faults stopped (final read at %s)", p, f.at.Sub(g.stoppedAt()).Round(time.Millisecond), ts(f.at))
	}

	// The API server's audit log, when the control plane has one.
	var reqs []chaos.DeleteRequest
	if g.w.auditLog != "" {
		if reqs, err = chaos.ReadDeleteRequests(g.w.auditLog); err != nil {
			add(invClaimSafety, "cannot read the API server's audit log %s: %v", g.w.auditLog, err)
		}
	}

	g.truth.mu.Lock()
	defer g.truth.mu.Unlock()
	for _, c := range f.claims {
		set, i := parseMember("claim", c.Name)
		if s := g.truth.sets[set]; s != nil && s.deleted() == nil && i >= s.replicas() && s.policy.DeletesOnScaledown() && g.podlessClaim(s, c) {
			g.leniency["checker: out-of-range claims kept, their pod never created"]++
		}
	}

	// Pods: deleted by hand, or out of range (a scale-down in force, or
	// the set deleted) at the revision of their deletion request.
	type podDel struct {
		d chaos.Deletion
		r revs
	}
	podsByName := map[string][]podDel{}
	// A deletion decided on a fresh read of the set that condemned the
	// pod, which a scale-up written after that read overtook, is the
	// documented window (reconcile.go, stillCondemned): counted, and
	// allowed, and so are its claims' deletions under whenScaled: Delete.
	condemnedBy := g.condemnedBy(podDels, reqs)
	// condemnedOnRead: the set at the version the pod's annotation names
	// condemned ordinal i (by a scale-down, or also by the set's deletion
	// unless scaledOnly), and that read was fresh: the first write of the
	// set after it was sent at most raceWindow before the deletion request
	// was seen. A controller deciding on a stale cache fails that.
	condemnedOnRead := func(s *setTruth, i int, d chaos.Deletion, r revs, scaledOnly bool) bool {
		rv, ok := condemnedBy[d.UID]
		at := revs{lo: rv, hi: rv}
		if !ok || (r.hi != 0 && rv > r.hi) || (scaledOnly && !s.mayBeScaledBelow(i, at)) || !s.mayBeUnwanted(i, at) {
			return false
		}
		for _, e := range s.events {
			if e.at.hi == 0 || e.at.hi > rv {
				return g.requestSeen(d).Sub(e.sent) <= raceWindow
			}
		}
		return true
	}
	// One violation per pod name, with how many more deletions of it
	// broke the invariant: a controller that deletes the wrong pod does so
	// on every pass.
	podViolations := map[string]int{}
	// The pods whose only delete requests (audit log) were the fake
	// kubelet's: KWOK removes a terminating pod with a delete by name,
	// without a UID precondition (a real kubelet sends one), so a stale
	// delete of it can remove the pod recreated under the name. The system
	// under test did not ask for that deletion; liveness judges the pod's
	// return. And the pods the node-lifecycle controller evicted (their
	// node did not renew its lease: a fault, or a KWOK starved of CPU), with
	// at most the fake kubelet's delete after it: the cluster's decision,
	// as a deletion by hand is.
	fakeKubeletOnly := map[types.UID]bool{}
	evicted := map[types.UID]bool{}
	for _, r := range reqs {
		if r.Resource == "pods" && r.APIGroup == "" && r.Namespace == g.w.ns {
			fakeKubelet := strings.HasPrefix(r.UserAgent, "kwok/")
			eviction := strings.HasSuffix(r.UserAgent, "/node-controller") || strings.HasSuffix(r.UserAgent, "/taint-eviction-controller")
			if prev, ok := fakeKubeletOnly[r.UID]; !ok || prev {
				fakeKubeletOnly[r.UID] = fakeKubelet
			}
			if prev, ok := evicted[r.UID]; !ok || prev {
				evicted[r.UID] = eviction || fakeKubelet
			}
		}
	}
	for _, d := range podDels {
		o := g.pods.get(d.UID)
		if !g.removal(d, o).exact() {
			g.leniency["checker: pod deletions found by a relist"]++
		}
		r := g.podRequested(d, o)
		set, i := parseMember("pod", d.Name)
		s := g.truth.sets[set]
		if g.truth.foreignUIDs[d.UID] {
			continue // the generator's
		}
		// Whoever deleted a set's pod, the garbage collector then deletes
		// the claims it owns (a condemned pod's, under whenScaled: Delete):
		// the claims' check below knows it went. Only the controller's
		// deletions are judged here.
		podsByName[d.Name] = append(podsByName[d.Name], podDel{d, r})
		if _, ok := g.truth.manual[d.UID]; ok {
			continue
		}
		if fakeKubeletOnly[d.UID] {
			g.leniency["checker: pods deleted by the fake kubelet alone (KWOK deletes by name: a stale delete of a pod recreated under the name)"]++
			continue
		}
		if evicted[d.UID] {
			g.leniency["checker: pods evicted by the node-lifecycle controller (their node NotReady)"]++
			continue
		}
		switch {
		case s == nil:
			add(invPodSafety, "pod %s (uid %s), of no set the workload created, was deleted (requested at revision %s)", d.Name, d.UID, r)
		case !s.mayBeUnwanted(i, r) && condemnedOnRead(s, i, d, r, false):
			g.leniency["checker: pod deletions decided on a read that condemned them, overtaken by a scale-up"]++
		case !s.mayBeUnwanted(i, r):
			if podViolations[d.Name]++; podViolations[d.Name] > 1 {
				continue
			}
			add(invPodSafety, "pod %s (uid %s) was deleted, requested at revision %s (seen %s, gone %s%s), while ordinal %d was in range: spec.replicas %v then; set %s",
				d.Name, d.UID, r, ts(g.requestSeen(d)), ts(d.Seen), senders(reqs, d.UID), i, s.valuesDuring(r), s.history())
		}
	}

	// Claims: a set deletion requested before, under whenDeleted: Delete;
	// or, under whenScaled: Delete, the deletion of its pod while a
	// scale-down condemned it, after the claim was created.
	deadline := g.truth.stopped.Add(g.o.bound)
	for _, d := range claimDels {
		o := g.claims.get(d.UID)
		a := g.requested(d, o)
		if !g.removal(d, o).exact() {
			g.leniency["checker: claim deletions found by a relist"]++
		}
		set, i := parseMember("claim", d.Name)
		s := g.truth.sets[set]
		if s == nil {
			add(invClaimSafety, "claim %s (uid %s), of no set the workload created, was deleted (requested at revision %s)", d.Name, d.UID, a)
			continue
		}
		allowed := ""
		if del := s.deleted(); del != nil && s.policy.DeletesOnOwnerDeletion() && del.at.mayPrecede(a.hi) {
			allowed = "set deleted"
		}
		if allowed == "" && s.policy.DeletesOnScaledown() {
			from := s.events[0].at.lo
			if o != nil {
				from = g.createdAfter(s, o)
			}
			for _, p := range podsByName[api.PodName(set, i)] {
				condemned := s.mayBeScaledBelow(i, p.r) || condemnedOnRead(s, i, p.d, p.r, true)
				if p.r.mayPrecede(a.hi) && (p.r.hi == 0 || p.r.hi > from) && condemned {
					allowed = "pod deleted while condemned"
					break
				}
			}
			if allowed == "" && o != nil {
				// Its pod came and went while the audit's watch was down:
				// the claim's last owners name a pod nobody saw.
				for _, ref := range o.owners {
					if ref.Kind == "Pod" && ref.Controller != nil && *ref.Controller && g.pods.get(ref.UID) == nil {
						allowed = "owned by a pod the audit never saw"
						g.leniency["checker: claim deletions allowed by an unseen pod owner"]++
					}
				}
			}
		}
		if allowed == "" {
			why := "its policy keeps it"
			if s.policy.DeletesOnScaledown() || s.policy.DeletesOnOwnerDeletion() {
				why = "no set deletion (whenDeleted: Delete) came before, nor did its pod go while a scale-down condemned it"
			}
			add(invClaimSafety, "claim %s (uid %s) was deleted, requested at revision %s (seen gone %s): %s; set %s",
				d.Name, d.UID, a, ts(d.Seen), why, s.history())
		}
		// Liveness: what the policy deletes by the end went within the
		// bound.
		r := s.replicas()
		due := (s.deleted() != nil && s.policy.DeletesOnOwnerDeletion()) || (s.deleted() == nil && i >= r && s.policy.DeletesOnScaledown())
		if due && d.Seen.After(deadline) {
			add(invLiveness, "claim %s (uid %s) was deleted by %s, after the bound %s", d.Name, d.UID, ts(d.Seen), ts(deadline))
		}
	}

	g.checkAuditLog(reqs, podDels, claimDels, add)

	// No data lost: every claim no allowed deletion could have reached
	// exists, with its UID.
	for _, c := range g.claims.all() {
		s := g.truth.sets[c.set]
		if s == nil {
			continue
		}
		if s.deleted() != nil && s.policy.DeletesOnOwnerDeletion() {
			continue
		}
		if s.policy.DeletesOnScaledown() && s.scaledBelowSince(c.ordinal, g.createdAfter(s, &c)) {
			continue
		}
		switch l := f.claims[c.name]; {
		case l == nil:
			add(invKept, "claim %s (uid %s, first seen %s) is gone; set %s", c.name, c.uid, ts(c.firstSeen), s.history())
		case l.UID != c.uid:
			add(invKept, "claim %s has uid %s, not its own %s (first seen %s); set %s", c.name, l.UID, c.uid, ts(c.firstSeen), s.history())
		case l.DeletionTimestamp != nil:
			add(invKept, "claim %s (uid %s) is being deleted since %s; set %s", c.name, c.uid, ts(l.DeletionTimestamp.Time), s.history())
		}
	}
	for i, v := range out {
		name, _, _ := strings.Cut(strings.TrimPrefix(v.Detail, "pod "), " ")
		if n := podViolations[name]; v.Invariant == invPodSafety && n > 1 {
			out[i].Detail += fmt.Sprintf(" (and %d more deletions of pod %s like it)", n-1, name)
		}
	}
	return out
}

// senders says who sent the delete requests of uid that the audit log
// recorded, for a report.
func senders(reqs []chaos.DeleteRequest, uid types.UID) string {
	var out []string
	for _, r := range reqs {
		if r.UID == uid {
			out = append(out, fmt.Sprintf("%s by %s", ts(r.Received), r.UserAgent))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "; audit log: " + strings.Join(out, ", ")
}

// condemnedBy returns, by pod UID, the set version a deleted pod was
// condemned by (api.CondemnedByAnnotation), from its last state the watch
// saw or the audit log's response to its delete (reqs).
func (g *spWorkload) condemnedBy(podDels []chaos.Deletion, reqs []chaos.DeleteRequest) map[types.UID]uint64 {
	out := map[types.UID]uint64{}
	add := func(uid types.UID, annotations map[string]string) {
		if v, err := strconv.ParseUint(annotations[api.CondemnedByAnnotation], 10, 64); err == nil {
			out[uid] = v
		}
	}
	for _, d := range podDels {
		if p, ok := d.Last.(*corev1.Pod); ok {
			add(d.UID, p.Annotations)
		}
	}
	for _, r := range reqs {
		if r.Resource != "pods" || r.Namespace != g.w.ns || r.Uncertain || out[r.UID] != 0 {
			continue
		}
		var p corev1.Pod
		if json.Unmarshal(r.Object, &p) == nil {
			add(r.UID, p.Annotations)
		}
	}
	return out
}

// checkAuditLog judges the claim deletions the API server's audit log
// (reqs) recorded and the watch missed (objects created and deleted while it was
// down, or planted blindness): a claim of a set whose policy keeps its
// claims (Retain on both) must never be deleted, nor one of a set the
// workload did not create. Other missed deletions cannot be placed in the
// set's history by revision; they are counted. It also judges every claim
// deletion request it recorded against the pods that mount the claim, the
// foreign pods' (by time, MountLog) and the sets' (by revision): only the
// audit log says who sent a request, and the garbage collector's are the
// policy's. Called with the truth locked.
func (g *spWorkload) checkAuditLog(reqs []chaos.DeleteRequest, podDels, claimDels []chaos.Deletion, add func(inv, format string, args ...any)) {
	seen := map[types.UID]bool{}
	for _, d := range append(slices.Clone(podDels), claimDels...) {
		seen[d.UID] = true
	}
	// When each pod seen was removed.
	podGone := map[types.UID]revs{}
	for _, d := range podDels {
		podGone[d.UID] = g.removal(d, g.pods.get(d.UID))
	}
	for _, r := range reqs {
		if r.Namespace != g.w.ns || r.APIGroup != "" {
			continue
		}
		switch r.Resource {
		case "pods":
			g.audited["observed: pod deletion requests (audit log)"]++
			if !seen[r.UID] {
				g.audited["observed: pod deletion requests, missed by the watch"]++
			}
		case "persistentvolumeclaims":
			g.audited["observed: claim deletion requests (audit log)"]++
			// The request was received while the pod existed, and the pod
			// had existed for the race bound before: its decision came
			// after the pod's creation.
			m, mounted := g.mounts.Covering(r.Name, r.Received, r.Received, g.o.mountRace)
			_, overlapped := g.mounts.Covering(r.Name, r.Received, r.Received, 0)
			a, known := g.claimRequestRevs(r)
			own, ownMounted := g.setPodMounting(r, a, podGone, g.o.mountRace)
			_, ownOverlapped := g.setPodMounting(r, a, podGone, 0)
			switch {
			case strings.HasSuffix(r.UserAgent, "/generic-garbage-collector"):
				if overlapped {
					g.audited["observed: claim deletions by the garbage collector while a foreign pod mounted the claim"]++
				}
				if ownOverlapped {
					g.audited["observed: claim deletions by the garbage collector while a set's pod mounted the claim"]++
				}
			case mounted:
				add(invMounted, "claim %s (uid %s) was deleted (audit log: received %s, by %s) while %s mounted it",
					r.Name, r.UID, ts(r.Received), r.UserAgent, m)
			case ownMounted:
				add(invMounted, "claim %s (uid %s) was deleted (audit log: received %s, by %s; requested at revision %s) while pod %s (uid %s), which mounts it, existed (seen from revision %d, first at %s; %s)",
					r.Name, r.UID, ts(r.Received), r.UserAgent, a, own.name, own.uid, own.firstRV, ts(own.firstSeen), g.goneString(own.uid, podGone))
			case overlapped:
				g.audited["checker: claim deletions within the race bound of a foreign pod's creation"]++
			case ownOverlapped:
				g.audited["checker: claim deletions within the race bound of a set's pod's creation"]++
			case !known:
				g.audited["checker: claim deletion requests at an unknown revision (not judged against the sets' pods)"]++
			}
			if seen[r.UID] {
				continue
			}
			g.audited["observed: claim deletion requests, missed by the watch"]++
			set, _ := parseMember("claim", r.Name)
			switch s := g.truth.sets[set]; {
			case s == nil:
				add(invClaimSafety, "claim %s (uid %s), of no set the workload created, was deleted (audit log: received %s, by %s)", r.Name, r.UID, ts(r.Received), r.User)
			case !s.policy.DeletesOnScaledown() && !s.policy.DeletesOnOwnerDeletion():
				add(invClaimSafety, "claim %s (uid %s) was deleted (audit log: received %s, by %s; the watch missed it): its policy keeps it; set %s", r.Name, r.UID, ts(r.Received), r.User, s.history())
			}
		}
	}
}

// claimRequestRevs is the revision interval of the claim deletion request
// r: exactly that of the object its answer returned, marked for deletion
// (claims carry the pvc-protection finalizer), else what the claim watch
// saw (its first version with a deletionTimestamp). ok is false when
// neither says.
func (g *spWorkload) claimRequestRevs(r chaos.DeleteRequest) (a revs, ok bool) {
	var m metav1.PartialObjectMetadata
	if json.Unmarshal(r.Object, &m) == nil && m.DeletionTimestamp != nil && m.UID == r.UID {
		if rv, err := strconv.ParseUint(m.ResourceVersion, 10, 64); err == nil && rv != 0 {
			return revs{lo: rv, hi: rv}, true
		}
	}
	if o := g.claims.get(r.UID); o != nil && o.termRV != 0 {
		return revs{lo: o.maxLiveRV + 1, hi: o.termRV}, true
	}
	return revs{}, false
}

// setPodMounting returns a pod of a set (not a foreign one) whose volumes
// name the claim of request r and that existed at every revision of a,
// the request's: seen at a lower revision, and removed at a higher one or
// still there. Such a pod may run, its claim mounted: off nodes it is gone
// once its delete is done, on a node it runs while it terminates and
// while its node does not answer, until it is gone from the API. As for
// the foreign pods, the pod must have been first seen race before the
// request was received: a deletion decided on a pod list taken just before
// the pod was created may be held on its way by a fault.
func (g *spWorkload) setPodMounting(r chaos.DeleteRequest, a revs, gone map[types.UID]revs, race time.Duration) (objTruth, bool) {
	if a.lo == 0 || a.hi == 0 {
		return objTruth{}, false
	}
	for _, p := range g.pods.all() {
		if g.truth.foreignUIDs[p.uid] || !slices.Contains(p.claims, r.Name) || p.firstRV >= a.lo || r.Received.Before(p.firstSeen.Add(race)) {
			continue
		}
		if at, removed := gone[p.uid]; !removed || a.hi < at.lo {
			return p, true
		}
	}
	return objTruth{}, false
}

// goneString says when pod uid was removed, for a report.
func (g *spWorkload) goneString(uid types.UID, gone map[types.UID]revs) string {
	if at, ok := gone[uid]; ok {
		return "removed at revision " + at.String()
	}
	return "still there"
}

func (g *spWorkload) stoppedAt() time.Time {
	g.truth.mu.Lock()
	defer g.truth.mu.Unlock()
	return g.truth.stopped
}

// observed adds to ops what the audits saw.
func (g *spWorkload) observed(ops map[string]int) {
	manual, foreign := 0, 0
	g.truth.mu.Lock()
	for _, d := range g.podAudit.Deletions() {
		if _, ok := g.truth.manual[d.UID]; ok {
			manual++
		}
		if g.truth.foreignUIDs[d.UID] {
			foreign++
		}
	}
	created := 0
	for _, p := range g.pods.all() {
		if !g.truth.foreignUIDs[p.uid] {
			created++
		}
	}
	g.truth.mu.Unlock()
	ops["observed: pods deleted (not by hand)"] = len(g.podAudit.Deletions()) - manual - foreign
	ops["observed: claims deleted"] = len(g.claimAudit.Deletions())
	ops["observed: claims created"] = len(g.claims.all())
	ops["observed: pods created"] = created
	g.truth.mu.Lock()
	defer g.truth.mu.Unlock()
	for k, n := range g.leniency {
		ops[k] = n
	}
	for k, n := range g.audited {
		ops[k] = n
	}
}
