package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/groundskeeper-io/groundskeeper/examples/backup-entry/api"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/chaos"
)

// The invariants of the backup-entry workload.
const (
	// An entry's prefix data is not deleted before its deletionTimestamp
	// plus the grace period, or before its deletion when forced (or never
	// admitted).
	invEarly = "no early deletion"
	// No key outside an entry's prefix is deleted: the look-alikes beside
	// it (<entry>-notes.txt, <entry>c/...) stay.
	invOutside = "nothing outside the prefix"
	// An entry's finalizer is removed only once its prefix is empty.
	invFinalizer = "finalizer after the prefix"
	// A bucket never holds more prefixes than its spec.maxEntries.
	invQuota = "quota"
	// Every deleted entry, its prefix and every deleted bucket are gone
	// within the bound; an entry waiting for a place gets one when its
	// bucket has room.
	invLiveness = "liveness"
	// What must be kept exists: entries and buckets not deleted, with
	// their UIDs, and their data and look-alikes.
	invKept = "no data lost"
)

// check compares what the audits, the hooks, the key histories and the
// quota sampler saw, and what exists now, with the ground truth.
func (g *beWorkload) check(ctx context.Context) []chaos.Violation {
	var out []chaos.Violation
	add := func(inv, format string, args ...any) {
		out = append(out, chaos.Violation{Invariant: inv, Detail: fmt.Sprintf(format, args...)})
	}
	g.hooks.Wait()
	entryDels := g.entryAudit.Deletions()
	bucketDels := g.bucketAudit.Deletions()
	keys := map[*beStore]map[string]chaos.KeyRecord{}
	for _, s := range g.w.stores {
		_ = chaos.Retry(s.keys.List)
		keys[s] = s.keys.Keys()
	}
	// Final state, read fresh.
	var entries api.BackupEntryList
	var buckets api.BackupBucketList
	err := chaos.Retry(func(ctx context.Context) error {
		if err := g.cl.List(ctx, &entries); err != nil {
			return err
		}
		return g.cl.List(ctx, &buckets)
	})
	if err != nil {
		add(invKept, "cannot read the final state: %v", err)
		return out
	}
	finalRead := time.Now()
	liveEntry := map[string]*api.BackupEntry{}
	for i := range entries.Items {
		liveEntry[entries.Items[i].Name] = &entries.Items[i]
	}
	liveBucket := map[string]types.UID{}
	for _, b := range buckets.Items {
		liveBucket[b.Name] = b.UID
	}

	g.truth.mu.Lock()
	defer g.truth.mu.Unlock()
	stopped := g.truth.stopped
	deadline := func(at time.Time) time.Time { return maxTime(at, stopped).Add(g.o.bound) }
	// What the generator could not read after a deletion (the entry was
	// gone first) comes from the audit's last state of it.
	goneAt := map[types.UID]time.Time{}
	for _, d := range entryDels {
		goneAt[d.UID] = d.Seen
		e := g.truth.entries[d.Name]
		if e == nil {
			continue
		}
		if be, ok := d.Last.(*api.BackupEntry); ok && be.UID == e.uid && be.DeletionTimestamp != nil {
			if e.deletionTS.IsZero() {
				e.deletionTS = be.DeletionTimestamp.Time
			}
			e.prefixAtDelete = e.prefixAtDelete || be.Status.Prefix != ""
		}
	}

	// Safety: every deletion seen was allowed when it happened. A key is
	// deleted before its GoneBy: one gone by the time its entry's prefix
	// could first be deleted was deleted early.
	for _, d := range entryDels {
		if e := g.truth.entries[d.Name]; e != nil && (e.uid != d.UID || e.deleteSent.IsZero()) {
			add(invKept, "entry %s (uid %s), which the workload did not delete, was deleted by %s", d.Name, d.UID, ts(d.Seen))
		}
	}
	lookalike := map[string]*entryTruth{}
	for _, e := range g.truth.order {
		for _, k := range e.lookalikes {
			lookalike[k] = e
		}
	}
	for _, s := range g.w.stores {
		for _, key := range sortedKeys(keys[s]) {
			r := keys[s][key]
			if r.GoneBy.IsZero() {
				continue
			}
			e := g.ownerOf(s, key)
			switch {
			case lookalike[key] != nil:
				add(invOutside, "%s key %s, beside entry %s's prefix, was deleted by %s", s.kind, key, lookalike[key].name, ts(r.GoneBy))
			case e == nil:
				add(invOutside, "%s key %s, in no entry's prefix, was deleted by %s", s.kind, key, ts(r.GoneBy))
			case e.deleteSent.IsZero():
				add(invEarly, "%s key %s was deleted by %s; its entry %s is not deleted", s.kind, key, ts(r.GoneBy), e.name)
			case r.GoneBy.Before(e.allowedFrom(g.o.grace)):
				add(invEarly, "%s key %s was deleted by %s, %s before entry %s's prefix could be (%s: deletion sent %s, deletionTimestamp %s, forced %s, admitted %v)",
					s.kind, key, ts(r.GoneBy), e.allowedFrom(g.o.grace).Sub(r.GoneBy).Round(time.Millisecond), e.name,
					ts(e.allowedFrom(g.o.grace)), ts(e.deleteSent), ts(e.deletionTS), ts(e.forceSent), e.protected())
			}
		}
	}

	// The finalizer goes after the prefix.
	g.mu.Lock()
	finalizers := slices.Clone(g.finalizers)
	breaches := slices.Clone(g.breaches)
	g.mu.Unlock()
	for _, f := range finalizers {
		switch {
		case f.err != nil:
			add(invFinalizer, "entry %s, gone by %s: its prefix could not be listed: %v", f.entry, ts(f.seen), f.err)
		case len(f.keys) > 0:
			add(invFinalizer, "entry %s was gone by %s while its prefix still held %d keys: %s", f.entry, ts(f.seen), len(f.keys), strings.Join(f.keys[:min(len(f.keys), 3)], ", "))
		}
	}

	// The quota.
	for _, q := range breaches {
		add(invQuota, "bucket %s (maxEntries %d) held %d prefixes at once between %s and %s: %s", q.bucket, q.max, len(q.prefixes), ts(q.from), ts(q.to), strings.Join(q.prefixes, ", "))
	}

	// Liveness: what was deleted went within the bound.
	for _, e := range g.truth.order {
		if e.deleteSent.IsZero() {
			continue
		}
		dl := deadline(e.allowedFrom(g.o.grace))
		at, ok := goneAt[e.uid]
		if l := liveEntry[e.name]; !ok && (l == nil || l.UID != e.uid) {
			// Gone while the audit's watch was down: the final read
			// bounds when.
			at, ok = finalRead, true
		}
		if !ok {
			l := liveEntry[e.name]
			add(invLiveness, "entry %s, deleted at %s, still exists (finalizers %v, conditions %s)", e.name, ts(e.deleteSent), l.Finalizers, conditions(l))
		} else if at.After(dl) {
			add(invLiveness, "entry %s, deleted at %s, was gone by %s, after the bound %s", e.name, ts(e.deleteSent), ts(at), ts(dl))
		}
		for key, r := range keys[e.bucket.store] {
			if !strings.HasPrefix(key, e.storePrefix()) {
				continue
			}
			if r.GoneBy.IsZero() {
				add(invLiveness, "%s key %s of entry %s, deleted at %s, still exists", e.bucket.store.kind, key, e.name, ts(e.deleteSent))
			} else if r.GoneBy.After(dl) {
				add(invLiveness, "%s key %s of entry %s was deleted by %s, after the bound %s", e.bucket.store.kind, key, e.name, ts(r.GoneBy), ts(dl))
			}
		}
	}
	bucketGone := map[types.UID]time.Time{}
	for _, d := range bucketDels {
		bucketGone[d.UID] = d.Seen
	}
	for _, b := range g.truth.buckets {
		if b.deleteSent.IsZero() {
			continue
		}
		last := b.deleteSent
		for _, e := range b.entries {
			last = maxTime(last, e.allowedFrom(g.o.grace))
		}
		dl := deadline(last).Add(g.o.bound / 2)
		at, ok := bucketGone[b.uid]
		if uid, live := liveBucket[b.name]; !ok && (!live || uid != b.uid) {
			at, ok = finalRead, true
		}
		if !ok {
			add(invLiveness, "bucket %s, deleted at %s, still exists", b.name, ts(b.deleteSent))
		} else if at.After(dl) {
			add(invLiveness, "bucket %s, deleted at %s, was gone by %s, after the bound %s", b.name, ts(b.deleteSent), ts(at), ts(dl))
		}
	}
	dirs := map[string][]string{}
	for _, b := range g.truth.buckets {
		if b.deleteSent.IsZero() && b.max > 0 {
			_ = chaos.Retry(func(ctx context.Context) (err error) {
				dirs[b.name], err = listDirs(ctx, b.store.direct, b.prefix)
				return err
			})
		}
	}
	for _, w := range g.waiting(liveEntry, dirs) {
		add(invLiveness, "%s", w)
	}

	// No data lost: what must be kept exists, with its UID.
	for _, b := range g.truth.buckets {
		if !b.deleteSent.IsZero() {
			continue
		}
		if uid, ok := liveBucket[b.name]; !ok {
			add(invKept, "bucket %s is gone", b.name)
		} else if uid != b.uid {
			add(invKept, "bucket %s has uid %s, not its own %s", b.name, uid, b.uid)
		}
	}
	for _, e := range g.truth.order {
		mustKeep := slices.Clone(e.lookalikes)
		if e.deleteSent.IsZero() {
			switch l := liveEntry[e.name]; {
			case l == nil:
				add(invKept, "entry %s is gone", e.name)
			case l.UID != e.uid:
				add(invKept, "entry %s has uid %s, not its own %s", e.name, l.UID, e.uid)
			case l.DeletionTimestamp != nil:
				add(invKept, "entry %s is being deleted since %s", e.name, ts(l.DeletionTimestamp.Time))
			}
			mustKeep = append(mustKeep, e.data...)
			if !e.admittedSeen.IsZero() {
				mustKeep = append(mustKeep, e.storePrefix()+markerKey)
			}
		}
		for _, k := range mustKeep {
			// The listing made for the check shows what exists; a key it
			// never knew (a marker deleted before any listing saw it) is
			// asked for.
			r, known := keys[e.bucket.store][k]
			ok, err := known && r.GoneBy.IsZero(), error(nil)
			if !known {
				err = chaos.Retry(func(ctx context.Context) (err error) {
					ok, err = e.bucket.store.direct.Exists(ctx, k)
					return err
				})
			}
			if err != nil {
				add(invKept, "%s key %s: %v", e.bucket.store.kind, k, err)
			} else if !ok {
				add(invKept, "%s key %s (entry %s, deleted: %v) is gone", e.bucket.store.kind, k, e.name, !e.deleteSent.IsZero())
			}
		}
	}
	return out
}

func conditions(be *api.BackupEntry) string {
	if be == nil {
		return "none"
	}
	var s []string
	for _, c := range be.Status.Conditions {
		s = append(s, fmt.Sprintf("%s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message))
	}
	return "[" + strings.Join(s, "; ") + "]"
}

// observed adds to ops what the controller was seen to do.
func (g *beWorkload) observed(ops map[string]int) {
	g.truth.mu.Lock()
	for _, d := range g.entryAudit.Deletions() {
		if e := g.truth.entries[d.Name]; e != nil && e.uid == d.UID {
			ops["observed: entries deleted"]++
		}
	}
	for _, d := range g.bucketAudit.Deletions() {
		for _, b := range g.truth.buckets {
			if b.uid == d.UID {
				ops["observed: buckets deleted"]++
			}
		}
	}
	admitted, waited := 0, 0
	for _, e := range g.truth.order {
		if !e.admittedSeen.IsZero() {
			admitted++
			if e.refusedSeen {
				waited++
			}
		}
	}
	g.truth.mu.Unlock()
	ops["observed: entries admitted"] = admitted
	ops["observed: entries admitted after waiting for a place"] = waited
	for _, s := range g.w.stores {
		n := 0
		for _, r := range s.keys.Keys() {
			if !r.GoneBy.IsZero() {
				n++
			}
		}
		ops["observed: "+s.kind+" keys deleted"] = n
		ok, failed := s.keys.Listings()
		ops["observed: "+s.kind+" listings"] = ok
		ops["observed: "+s.kind+" listings failed"] = failed
	}
	g.mu.Lock()
	ops["observed: quota listings"] = g.quotaLists
	g.mu.Unlock()
}
