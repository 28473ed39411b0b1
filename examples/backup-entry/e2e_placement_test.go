package main

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/pool"
	"github.com/groundskeeper-io/groundskeeper/examples/backup-entry/api"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// An entry that names no bucket and that its pool has not placed (here
// never: its provider has no --quota, NoPool) has no data anywhere, and
// holds up no other entry's deletion. The collector's nested-prefix guard
// reads every entry's location and keeps a backup while one cannot be
// read; an entry not placed must say "no data", not fail (the chaos run
// found every deletion of the cluster waiting while the pool grew).
func TestUnplacedEntryHoldsUpNoDeletion(t *testing.T) {
	e := newPoolEnv(t, testenv.S3(t), "aws")
	aws := e.provider
	startManager(t, e.k.Config, e.k.Namespace, controllerOptions{grace: time.Hour, quota: pool.Limits{aws: 2}, wrap: scoped(e.tag)})
	e.cleanup()
	placed := e.createShoot("placed", nil)
	be := e.waitEntry(placed, "admitted", func(be *api.BackupEntry) bool {
		return hasReason(be, api.ConditionAdmitted, metav1.ConditionTrue, "Admitted")
	})
	prefix := be.Status.Prefix
	e.write(prefix, "v2/Full-00000000")
	e.provider = e.tag + "-gcp"
	unplaced := e.createShoot("unplaced", nil)
	e.waitEntry(unplaced, "refused, NoPool", func(be *api.BackupEntry) bool {
		return hasReason(be, api.ConditionAdmitted, metav1.ConditionFalse, share.ReasonNoPool)
	})
	e.provider = aws

	e.setForce(placed, true)
	e.delete(api.EntryResource, placed)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		be := e.entry(placed)
		if be == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("entry %s, deleted with force, is still there 30 s later, while entry %s waits to be placed: conditions %s", placed, unplaced, conditions(be))
		}
	}
	if keys := e.keysUnder(prefix); len(keys) > 0 {
		t.Errorf("entry %s gone, its prefix holds %v", placed, keys)
	}
}
