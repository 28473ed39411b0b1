package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"gocloud.dev/gcerrors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundskeeper-io/groundskeeper/backupstore/share/pool"
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
	// A pool's store bucket is deleted only when no entry that is not
	// deleted (or whose prefix may not be deleted yet) has its prefix
	// there; an admitted entry's store bucket is there when the generator
	// writes to it. Each installation's checker judges its own entries.
	invOwner = "no store bucket deleted under an entry"
	// A legacy key of a migration is, at every moment, in the legacy
	// prefix or copied into the entry's prefix (nothing in neither); a
	// migration whose source is a shared bucket, or another entry's
	// prefix, under any spelling, never starts.
	invMigration = "nothing in neither"
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
	stores := g.stores()
	for _, s := range stores {
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
	var dirs map[string][]string
	_ = chaos.Retry(func(ctx context.Context) (err error) {
		dirs, err = g.limitedDirs(ctx, buckets.Items)
		return err
	})

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
	legacyOf := map[string]*entryTruth{}
	for _, e := range g.truth.order {
		for _, k := range e.lookalikes {
			lookalike[k] = e
		}
		if m := e.migration; m != nil && m.kind == migrateLegacy {
			lookalike[m.lookalike] = e
			for _, k := range m.keys {
				legacyOf[k] = e
			}
		}
	}
	for _, s := range stores {
		for _, key := range sortedKeys(keys[s]) {
			r := keys[s][key]
			if r.GoneBy.IsZero() {
				continue
			}
			if e := legacyOf[key]; e != nil && s == g.w.legacy {
				g.checkLegacyKey(add, keys, e, key, r)
				continue
			}
			if s.keys.BucketMayGo && key == pool.BucketOwnerKey {
				continue // the store bucket's: invOwner judges its deletion
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

	// A pool's store bucket goes with no entry's prefix in it.
	for _, s := range stores {
		if !s.keys.BucketMayGo {
			continue
		}
		for _, at := range s.keys.Gone() {
			for _, e := range g.truth.order {
				if e.bucket == nil || e.bucket.store != s || e.admittedSeen.IsZero() || !e.admittedSeen.Before(at) {
					continue
				}
				switch {
				case e.deleteSent.IsZero():
					add(invOwner, "store bucket %s was deleted by %s while entry %s (bucket %s, admitted by %s, not deleted) had its prefix there",
						s.bucket, ts(at), e.name, e.bucket.name, ts(e.admittedSeen))
				case e.allowedFrom(g.o.grace).After(at):
					add(invOwner, "store bucket %s was deleted by %s while entry %s (bucket %s, admitted by %s, deletion sent %s) had its prefix there, deletable only from %s",
						s.bucket, ts(at), e.name, e.bucket.name, ts(e.admittedSeen), ts(e.deleteSent), ts(e.allowedFrom(g.o.grace)))
				}
			}
		}
	}

	// The finalizer goes after the prefix.
	g.mu.Lock()
	finalizers := slices.Clone(g.finalizers)
	breaches := slices.Clone(g.breaches)
	lost := slices.Clone(g.lostWrites)
	g.mu.Unlock()
	for _, l := range lost {
		add(invOwner, "a write of %s", l)
	}
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
		if e.bucket == nil {
			continue // never placed where the generator saw: no data of its
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
	for _, w := range g.waiting(liveEntry, dirs) {
		add(invLiveness, "%s", w)
	}
	for _, e := range g.truth.order {
		l := liveEntry[e.name]
		live := e.deleteSent.IsZero() && l != nil && l.UID == e.uid
		if live && e.pool && l.Status.Prefix == "" {
			add(invLiveness, "entry %s of the pool has no prefix (bucket %q, conditions %s)", e.name, l.Spec.BucketName, conditions(l))
		}
		m := e.migration
		if m == nil {
			continue
		}
		if live {
			m.see(l, finalRead)
		}
		switch {
		case m.kind != migrateLegacy && !m.startedSeen.IsZero():
			add(invMigration, "entry %s, whose source %s is %s, was migrated (first seen at %s)", e.name, m.source, m.kind, ts(m.startedSeen))
		case !live || l.Status.Prefix == "":
			// Deleted, or not admitted (waiting says whether it should
			// be): its migration waits.
		case m.kind != migrateLegacy && !m.refusedSeen:
			add(invLiveness, "entry %s, whose source %s is %s, is not refused (conditions %s)", e.name, m.source, m.kind, conditions(l))
		case m.kind == migrateLegacy && m.doneSeen.IsZero():
			add(invLiveness, "entry %s is not migrated from %s (status.migration %+v, conditions %s)", e.name, m.source, l.Status.Migration, conditions(l))
		}
	}
	for _, e := range g.truth.order {
		// A migration's legacy keys go once it is done; a refused one's
		// source was never the generator's to fill.
		m := e.migration
		if m == nil || m.kind != migrateLegacy || m.doneSeen.IsZero() {
			continue
		}
		for _, k := range m.keys {
			if r, ok := keys[g.w.legacy][k]; ok && r.GoneBy.IsZero() {
				add(invLiveness, "legacy key %s of entry %s, migrated by %s, still exists", k, e.name, ts(m.doneSeen))
			}
		}
	}

	// No data lost: what must be kept exists, with its UID.
	for _, b := range g.truth.buckets {
		if !b.deleteSent.IsZero() || b.pool {
			continue
		}
		if uid, ok := liveBucket[b.name]; !ok {
			add(invKept, "bucket %s is gone", b.name)
		} else if uid != b.uid {
			add(invKept, "bucket %s has uid %s, not its own %s", b.name, uid, b.uid)
		}
	}
	for _, e := range g.truth.order {
		type storeKey struct {
			s   *beStore
			key string
		}
		var mustKeep []storeKey
		keep := func(s *beStore, keys ...string) {
			for _, k := range keys {
				mustKeep = append(mustKeep, storeKey{s, k})
			}
		}
		if e.bucket != nil {
			keep(e.bucket.store, e.lookalikes...)
		}
		m := e.migration
		if m != nil && m.kind == migrateLegacy {
			keep(g.w.legacy, m.lookalike)
		}
		if e.deleteSent.IsZero() {
			switch l := liveEntry[e.name]; {
			case l == nil:
				add(invKept, "entry %s is gone", e.name)
			case l.UID != e.uid:
				add(invKept, "entry %s has uid %s, not its own %s", e.name, l.UID, e.uid)
			case l.DeletionTimestamp != nil:
				add(invKept, "entry %s is being deleted since %s", e.name, ts(l.DeletionTimestamp.Time))
			}
			if e.bucket != nil {
				keep(e.bucket.store, e.data...)
				if !e.admittedSeen.IsZero() {
					keep(e.bucket.store, e.storePrefix()+markerKey)
				}
				if m != nil && m.kind == migrateLegacy && !m.doneSeen.IsZero() {
					for _, k := range m.keys {
						keep(e.bucket.store, m.target(e, k))
					}
				}
			}
		}
		for _, sk := range mustKeep {
			// The listing made for the check shows what exists; a key it
			// never knew (a marker deleted before any listing saw it) is
			// asked for.
			s, k := sk.s, sk.key
			r, known := keys[s][k]
			ok, err := known && r.GoneBy.IsZero(), error(nil)
			if !known {
				err = chaos.Retry(func(ctx context.Context) (err error) {
					ok, err = s.direct.Exists(ctx, k)
					if s.keys.BucketMayGo && gcerrors.Code(err) == gcerrors.NotFound {
						ok, err = false, nil // the store bucket is gone
					}
					return err
				})
			}
			if err != nil {
				add(invKept, "%s key %s: %v", s.kind, k, err)
			} else if !ok {
				add(invKept, "%s key %s (entry %s, deleted: %v) is gone", s.kind, k, e.name, !e.deleteSent.IsZero())
			}
		}
	}
	return out
}

// checkLegacyKey judges the deletion of key, a legacy key of entry e's
// migration, gone by r.GoneBy: its copy under e's prefix must have been
// there before (listed, or written, before the listing that found the
// legacy key gone ended).
func (g *beWorkload) checkLegacyKey(add func(inv, format string, args ...any), keys map[*beStore]map[string]chaos.KeyRecord, e *entryTruth, key string, r chaos.KeyRecord) {
	m := e.migration
	if e.bucket == nil {
		// Gone before the generator read where the pool placed it (the
		// generator reads the entries until the run settles): where its
		// copies went is not known.
		return
	}
	target := m.target(e, key)
	tr, ok := keys[e.bucket.store][target]
	switch {
	case ok && tr.Written.Before(r.GoneBy):
	case !ok && !e.bucket.store.since.Before(r.GoneBy):
		// Its copy's store bucket was listed only from later on: it
		// cannot tell.
	case ok:
		add(invMigration, "legacy key %s of entry %s was deleted by %s; its copy %s appeared only by %s", key, e.name, ts(r.GoneBy), target, ts(tr.Written))
	default:
		add(invMigration, "legacy key %s of entry %s was deleted by %s; its copy %s (%s, bucket %s) was never seen", key, e.name, ts(r.GoneBy), target, e.bucket.store.kind, e.bucket.name)
	}
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
			ops[g.opName("observed: entries deleted")]++
		}
	}
	for _, d := range g.bucketAudit.Deletions() {
		for _, b := range g.truth.buckets {
			if b.uid == d.UID && b.pool {
				ops[g.opName("observed: pool buckets deleted")]++
			} else if b.uid == d.UID {
				ops[g.opName("observed: buckets deleted")]++
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
		if e.pool && e.bucket != nil {
			ops[g.opName("observed: entries placed by the pool")]++
		}
		switch m := e.migration; {
		case m == nil:
		case m.kind == migrateLegacy && !m.doneSeen.IsZero():
			ops[g.opName("observed: migrations done")]++
		case m.kind != migrateLegacy && m.refusedSeen:
			ops[g.opName("observed: migrations refused (source shared)")]++
		}
	}
	for _, b := range g.truth.buckets {
		if b.pool && b.name != g.poolFirstName() {
			ops[g.opName("observed: pool buckets grown")]++
		}
	}
	g.truth.mu.Unlock()
	ops[g.opName("observed: entries admitted")] = admitted
	ops[g.opName("observed: entries admitted after waiting for a place")] = waited
	for _, s := range g.stores() {
		n := 0
		for _, r := range s.keys.Keys() {
			if !r.GoneBy.IsZero() {
				n++
			}
		}
		ops[g.opName("observed: "+s.kind+" keys deleted")] += n
		ok, failed := s.keys.Listings()
		ops[g.opName("observed: "+s.kind+" listings")] += ok
		ops[g.opName("observed: "+s.kind+" listings failed")] += failed
		if s.keys.BucketMayGo {
			ops[g.opName("observed: pool store buckets deleted")] += len(s.keys.Gone())
		}
	}
	g.mu.Lock()
	ops[g.opName("observed: quota listings")] = g.quotaLists
	g.mu.Unlock()
}
