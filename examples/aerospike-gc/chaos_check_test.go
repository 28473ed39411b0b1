package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/examples/aerospike-gc/api"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/chaos"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// The invariants of the aerospike-gc workload.
const (
	invSafety   = "safety"       // nothing deleted before its time or outside its prefix
	invLiveness = "liveness"     // everything expired deleted within the bound
	invKept     = "no data lost" // what must be kept exists, with its UID
	// No claim is deleted while a pod mounts it, whoever made the pod.
	invMounted = "no mounted claim deleted"
)

func secretData(endpoint string) map[string]string {
	return map[string]string{
		backupstore.SecretKeyAccessKeyID:     testenv.S3AccessKeyID,
		backupstore.SecretKeySecretAccessKey: testenv.S3SecretAccessKey,
		backupstore.SecretKeyRegion:          testenv.S3Region,
		backupstore.SecretKeyEndpoint:        endpoint,
		backupstore.SecretKeyS3PathStyle:     "true",
	}
}

func ts(t time.Time) string { return t.Format("15:04:05.000") }

// check compares what the audits and the key history saw, and what exists
// now, with the ground truth.
func (g *gcWorkload) check(ctx context.Context) []chaos.Violation {
	var out []chaos.Violation
	add := func(inv, format string, args ...any) {
		out = append(out, chaos.Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...)})
	}
	backupDels, claimDels, err := g.deletions()
	if err != nil {
		add(invSafety, "cannot read the API server's audit log: %v", err)
	}
	keys := g.keys.Keys()
	// Final state, read fresh.
	var backups api.AerospikeNamespaceBackupList
	var claims *corev1.PersistentVolumeClaimList
	err = chaos.Retry(func(ctx context.Context) (err error) {
		if err = g.cl.List(ctx, &backups, client.InNamespace(g.w.ns)); err != nil {
			return err
		}
		claims, err = g.kc.CoreV1().PersistentVolumeClaims(g.w.ns).List(ctx, metav1.ListOptions{})
		return err
	})
	if err != nil {
		add(invKept, "cannot read the final state: %v", err)
		return out
	}
	finalRead := time.Now()
	liveBackups := map[string]types.UID{}
	for _, b := range backups.Items {
		liveBackups[b.Name] = b.UID
	}
	liveClaims := map[string]*corev1.PersistentVolumeClaim{}
	live := map[types.UID]bool{}
	for i := range claims.Items {
		liveClaims[claims.Items[i].Name] = &claims.Items[i]
		live[claims.Items[i].UID] = true
	}
	for _, b := range backups.Items {
		live[b.UID] = true
	}
	// A delete in the audit log that the watch did not deliver: either
	// the object is still there, marked (a finalizer holds it), or the
	// watch missed it.
	for uid, what := range g.watchMissed {
		if live[uid] {
			g.seen[what+" deleted, still finalizing at the final read"]++
		} else {
			g.seen[what+" deleted, missed by the watch"]++
		}
	}

	g.truth.mu.Lock()
	defer g.truth.mu.Unlock()
	stopped := g.truth.stopped
	deadline := func(e time.Time) time.Time {
		if e.Before(stopped) {
			e = stopped
		}
		return e.Add(g.o.bound)
	}
	// Creation times the generator could not read (the object was gone
	// first) come from the audit's last state of it.
	for _, d := range backupDels {
		if b := g.truth.backups[d.Name]; b != nil && b.created.IsZero() {
			if o, ok := d.Last.(*api.AerospikeNamespaceBackup); ok {
				b.uid, b.created = o.UID, o.CreationTimestamp.Time
			}
		}
	}

	// (a) Safety: every deletion seen was allowed when it happened.
	deletedAt := map[types.UID]time.Time{}
	// A request cut short whose object is still there deleted nothing; it
	// is judged for safety all the same (no early delete may be sent).
	tookEffect := func(d chaos.Deletion) bool { return !g.uncertain[d.UID] || !live[d.UID] }
	for _, d := range backupDels {
		if tookEffect(d) {
			deletedAt[d.UID] = d.Seen
		}
		at := d.Seen // by then at the latest; from the audit log, when it was asked
		if !d.Requested.IsZero() {
			at = d.Requested
		}
		b := g.truth.backups[d.Name]
		switch {
		case b == nil || (b.uid != "" && b.uid != d.UID):
			add(invSafety, "backup %s (uid %s) that the workload did not create was deleted by %s", d.Name, d.UID, ts(d.Seen))
		case !b.userDeleted.IsZero():
			// Its owner deleted it.
		case b.expiry().IsZero():
			add(invSafety, "backup %s (%s, ttl %s) was deleted by %s; it must never be", b.name, b.class, b.ttl, ts(d.Seen))
		case at.Before(b.expiry()):
			add(invSafety, "backup %s was deleted at %s, %s before it expired at %s", b.name, ts(at), b.expiry().Sub(at).Round(time.Millisecond), ts(b.expiry()))
		}
	}
	for _, d := range claimDels {
		c := g.truth.claims[d.Name]
		if c == nil || c.uid != d.UID {
			add(invSafety, "claim %s (uid %s) that the workload did not create was deleted by %s", d.Name, d.UID, ts(d.Seen))
			continue
		}
		// Deleted at some instant in [lo, hi]: the deletionTimestamp is
		// in seconds.
		lo, hi := d.Requested, d.Seen
		if tookEffect(d) {
			deletedAt[d.UID] = hi // no deletionTimestamp: a relist found it gone
		}
		if !lo.IsZero() && tookEffect(d) {
			deletedAt[d.UID] = lo
			if lo.Add(time.Second).Before(hi) {
				hi = lo.Add(time.Second)
			}
		}
		if !c.allowedAt(lo) && !c.allowedAt(hi) {
			add(invSafety, "claim %s (ttl %s, mounts %s) was deleted between %s and %s, while mounted or within its TTL of an unmount", c.name, c.ttl, mountsString(c.mounts), ts(lo), ts(hi))
		}
		// Any pod, the operator's or another's (whose mounts the TTL
		// judgement above does not see). A deletion that lacks a lower
		// bound (a relist found the claim gone) cannot be placed.
		//
		// A replica's delete may be held on its way by a fault after its
		// fresh pod list (mountRace). The generator's CheckReuse is judged
		// with no such bound: the generator creates every pod and calls
		// CheckReuse from one goroutine, so a pod whose create had returned
		// (Mount.From) before the delete was received (lo) was created
		// before CheckReuse was called, and was there at its fresh pod
		// list; a pod created after the call returned has From after lo.
		// Its connection goes straight to the API server, with no fault
		// and no client rate limit between its list and its delete; a
		// delete held inside the API server (etcd's connection) keeps its
		// Received time.
		race := g.o.mountRace
		if g.byReuse[reuseKey{d.UID, d.Requested}] {
			race = 0
		}
		if m, ok := g.mounts.Covering(c.name, lo, hi, race); ok {
			by := "a replica"
			if g.byReuse[reuseKey{d.UID, d.Requested}] {
				by = "the generator's CheckReuse"
			}
			add(invMounted, "claim %s (uid %s) was deleted by %s between %s and %s while %s mounted it", c.name, c.uid, by, ts(lo), ts(hi), m)
		} else if _, ok := g.mounts.Covering(c.name, lo, hi, 0); ok {
			g.seen["claims deleted within the race bound of a pod's creation"]++
		}
	}
	owner := map[string]*backupTruth{}
	decoyOf := map[string]*backupTruth{}
	for _, b := range g.truth.backups {
		for _, k := range b.keys {
			owner[k] = b
		}
		decoyOf[b.decoy] = b
	}
	for key, r := range keys {
		if r.GoneBy.IsZero() {
			continue
		}
		b := owner[key]
		switch {
		case decoyOf[key] != nil:
			add(invSafety, "key %s, beside backup %s's prefix and in no backup's, was deleted by %s", key, decoyOf[key].name, ts(r.GoneBy))
		case b == nil:
			add(invSafety, "key %s, which the workload did not write, was deleted by %s", key, ts(r.GoneBy))
		case !b.userDeleted.IsZero() || b.expiry().IsZero():
			add(invSafety, "key %s of backup %s (%s, deleted by its owner: %v) was deleted by %s; it must never be", key, b.name, b.class, !b.userDeleted.IsZero(), ts(r.GoneBy))
		case r.GoneBy.Before(b.expiry()):
			add(invSafety, "key %s was deleted by %s, %s before backup %s expired at %s", key, ts(r.GoneBy), b.expiry().Sub(r.GoneBy).Round(time.Millisecond), b.name, ts(b.expiry()))
		}
	}

	// (b) Liveness: what expired went within the bound.
	for _, name := range g.truth.order {
		b := g.truth.backups[name]
		e := b.expiry()
		if e.IsZero() || !b.userDeleted.IsZero() {
			continue
		}
		dl := deadline(e)
		at, ok := deletedAt[b.uid]
		if uid, live := liveBackups[name]; !ok && (!live || (b.uid != "" && uid != b.uid)) {
			// Created and deleted while the audit's watch was down (an API
			// server restart): without an audit log to say when, the final
			// read bounds it; with one, a deletion it did not record is
			// data lost.
			at, ok = finalRead, true
			if g.w.auditLog != "" {
				add(invKept, "backup %s (uid %s) is gone, and neither the API server's audit log nor the watch recorded its deletion", name, b.uid)
			}
		}
		if !ok {
			add(invLiveness, "backup %s expired at %s and still exists (uid %s in the final list, %s)", name, ts(e), liveBackups[name], ts(finalRead))
		} else if at.After(dl) {
			add(invLiveness, "backup %s expired at %s and was deleted by %s, after the bound %s", name, ts(e), ts(at), ts(dl))
		}
		for _, k := range b.keys {
			if gone := keys[k].GoneBy; gone.IsZero() {
				add(invLiveness, "key %s of backup %s, expired at %s, still exists", k, name, ts(e))
			} else if gone.After(dl) {
				add(invLiveness, "key %s of backup %s, expired at %s, was deleted by %s, after the bound %s", k, name, ts(e), ts(gone), ts(dl))
			}
		}
	}
	for _, name := range g.truth.corder {
		c := g.truth.claims[name]
		e := c.expiry()
		if e.IsZero() {
			continue
		}
		at, ok := deletedAt[c.uid]
		l := liveClaims[name]
		switch {
		case l != nil && l.UID == c.uid && l.DeletionTimestamp != nil:
			at, ok = l.DeletionTimestamp.Time, true
		case !ok && (l == nil || l.UID != c.uid):
			// Gone, but the watch did not see it go (it was down): as for
			// backups.
			at, ok = finalRead, true
			if g.w.auditLog != "" {
				add(invKept, "claim %s (uid %s) is gone, and neither the API server's audit log nor the watch recorded its deletion", name, c.uid)
			}
		}
		if !ok {
			var state string
			if l != nil {
				state = fmt.Sprintf(" (uid %s, finalizers %v, in the final list at %s)", l.UID, l.Finalizers, ts(finalRead))
			}
			add(invLiveness, "claim %s expired at %s and still exists%s", name, ts(e), state)
		} else if dl := deadline(e); at.After(dl) {
			add(invLiveness, "claim %s expired at %s and was deleted at %s, after the bound %s", name, ts(e), ts(at), ts(dl))
		}
	}

	// (c) No data lost: what must be kept exists, with its UID.
	now := time.Now()
	for _, name := range g.truth.order {
		b := g.truth.backups[name]
		if b.class != classExpires && b.userDeleted.IsZero() && b.uid != "" {
			if uid, ok := liveBackups[name]; !ok {
				add(invKept, "backup %s (%s) is gone", name, b.class)
			} else if uid != b.uid {
				add(invKept, "backup %s (%s) has uid %s, not its own %s", name, b.class, uid, b.uid)
			}
		}
		mustKeep := []string{b.decoy}
		if b.class != classExpires {
			mustKeep = append(mustKeep, b.keys...)
		}
		for _, k := range mustKeep {
			var ok bool
			err := chaos.Retry(func(ctx context.Context) (err error) {
				ok, err = g.w.store.Exists(ctx, k)
				return err
			})
			if err != nil {
				add(invKept, "key %s: %v", k, err)
			} else if !ok {
				add(invKept, "key %s (backup %s, %s) is gone", k, name, b.class)
			}
		}
	}
	for _, name := range g.truth.corder {
		c := g.truth.claims[name]
		if !c.mustKeep(now) {
			continue
		}
		switch l := liveClaims[name]; {
		case l == nil:
			add(invKept, "claim %s (ttl %s, mounts %s) is gone", name, c.ttl, mountsString(c.mounts))
		case l.UID != c.uid:
			add(invKept, "claim %s has uid %s, not its own %s", name, l.UID, c.uid)
		case l.DeletionTimestamp != nil:
			add(invKept, "claim %s (ttl %s, mounts %s) is being deleted since %s", name, c.ttl, mountsString(c.mounts), ts(l.DeletionTimestamp.Time))
		}
	}
	return out
}

func mountsString(ms []mount) string {
	s := ""
	for _, m := range ms {
		to := "now"
		if !m.to.IsZero() {
			to = ts(m.to)
		}
		s += "[" + ts(m.from) + "," + to + ")"
	}
	return s
}

// reuseKey names one claim deletion in the audit log: the claim's UID and
// when the request was received (a claim may be asked to go twice).
type reuseKey struct {
	uid      types.UID
	received time.Time
}

// deletions are the deletions of backups and claims seen by the API
// server's audit log, when the control plane has one, and by the audits'
// watches. The audit log's are exact (when the delete request was received
// and completed) and miss nothing; a watch's Seen is when the informer
// heard of it, and a watch misses an object created and deleted while it
// was down. A deletion both saw is taken from the audit log.
func (g *gcWorkload) deletions() (backups, claims []chaos.Deletion, err error) {
	var reqs []chaos.DeleteRequest
	if g.w.auditLog != "" {
		reqs, err = chaos.ReadDeleteRequests(g.w.auditLog)
	}
	fromLog := map[types.UID]bool{}
	var cutShort []chaos.DeleteRequest
	g.byReuse = map[reuseKey]bool{}
	for _, r := range reqs {
		if r.Namespace != g.w.ns {
			continue
		}
		if r.Resource == "persistentvolumeclaims" && r.UserAgent == reuseUserAgent && r.UID != "" && !r.Uncertain {
			g.byReuse[reuseKey{r.UID, r.Received}] = true
		}
		if r.Uncertain {
			cutShort = append(cutShort, r)
			continue
		}
		d := chaos.Deletion{UID: r.UID, Namespace: r.Namespace, Name: r.Name, Seen: r.Completed, Requested: r.Received}
		switch r.Resource {
		case "aerospikenamespacebackups":
			backups = append(backups, d)
		case "persistentvolumeclaims":
			claims = append(claims, d)
		default:
			continue
		}
		fromLog[r.UID] = true
	}
	g.seen, g.watchMissed = map[string]int{}, map[types.UID]string{}
	merge := func(what string, into []chaos.Deletion, watched []chaos.Deletion) []chaos.Deletion {
		g.seen[what+" deleted, seen by the watch only"] = 0
		g.seen[what+" deleted, missed by the watch"] = 0
		inWatch := map[types.UID]bool{}
		for _, d := range watched {
			inWatch[d.UID] = true
			if !fromLog[d.UID] {
				into = append(into, d)
				g.seen[what+" deleted, seen by the watch only"]++
			}
		}
		for _, d := range into {
			if fromLog[d.UID] && !inWatch[d.UID] {
				g.watchMissed[d.UID] = what
			}
		}
		g.seen[what+" deleted"] = len(into)
		return into
	}
	backups = merge("backups", backups, g.backupAudit.Deletions())
	claims = merge("claims", claims, g.claimAudit.Deletions())

	// A request cut short (its sender killed mid-request, or the API
	// server) may have deleted its object: where nothing else recorded the
	// object's deletion, it is taken as deleted when the request was
	// received, and judged so. It names the object, not always its UID: the
	// workload's names are unique.
	g.truth.mu.Lock()
	defer g.truth.mu.Unlock()
	g.uncertain = map[types.UID]bool{}
	known := map[types.UID]bool{}
	for _, d := range append(slices.Clone(backups), claims...) {
		known[d.UID] = true
	}
	for _, r := range cutShort {
		uid, what := r.UID, ""
		switch r.Resource {
		case "aerospikenamespacebackups":
			if b := g.truth.backups[r.Name]; uid == "" && b != nil {
				uid = b.uid
			}
			what = "backups"
		case "persistentvolumeclaims":
			if c := g.truth.claims[r.Name]; uid == "" && c != nil {
				uid = c.uid
			}
			what = "claims"
		default:
			continue
		}
		if uid == "" || known[uid] {
			continue
		}
		known[uid], g.uncertain[uid] = true, true
		if r.UserAgent == reuseUserAgent && what == "claims" {
			g.byReuse[reuseKey{uid, r.Received}] = true
		}
		d := chaos.Deletion{UID: uid, Namespace: r.Namespace, Name: r.Name, Seen: r.Received, Requested: r.Received}
		if !r.Completed.IsZero() {
			d.Seen = r.Completed
		}
		if what == "backups" {
			backups = append(backups, d)
		} else {
			claims = append(claims, d)
		}
		g.seen[what+" deleted, known only from a request cut short"]++
	}
	g.seen["claims deleted by the reuse check"] = len(g.byReuse)
	return backups, claims, err
}

// observed adds to ops what the collectors were seen to delete.
func (g *gcWorkload) observed(ops map[string]int) {
	for k, v := range g.seen {
		ops["observed: "+k] = v
	}
	n := 0
	for _, r := range g.keys.Keys() {
		if !r.GoneBy.IsZero() {
			n++
		}
	}
	ops["observed: keys deleted"] = n
	ok, failed := g.keys.Listings()
	ops["observed: store listings"] = ok
	ops["observed: store listings failed"] = failed
}
