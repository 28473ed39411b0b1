package main

import (
	"context"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/s3store" // s3://
	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/crt/backups"
	"github.com/groundskeeper-io/groundskeeper/examples/minidb/api"
	"github.com/groundskeeper-io/groundskeeper/retention"
)

var outcomes = map[string]retention.Outcome{"Succeeded": retention.OutcomeSucceeded, "Failed": retention.OutcomeFailed}

// setupBackups collects each database's backups by its spec.retention,
// their data first.
func setupBackups(mgr manager.Manager) error {
	c, err := collect.New(collect.Config[*api.MiniDBBackup]{
		Objects:  backups.Objects[*api.MiniDBBackup](mgr.GetClient(), mgr.GetAPIReader()),
		Secrets:  crt.Secrets(mgr.GetAPIReader()),
		Recorder: crt.Events(mgr.GetEventRecorder("minidb-backups")),
		Location: func(_ context.Context, b *api.MiniDBBackup) (collect.Location, error) {
			return collect.Location{URL: b.Spec.BucketURL, Prefix: b.Spec.Prefix, Secret: b.Spec.Secret, SecretField: "spec.secret"}, nil
		},
		Keep: collect.GroupPolicy[*api.MiniDBBackup]{
			Group:   func(b *api.MiniDBBackup) string { return b.Namespace + "/" + b.Spec.Database },
			Policy:  backups.PolicyOf[*api.MiniDB](mgr.GetClient(), "spec.retention", func(db *api.MiniDB) string { return db.Spec.Retention }),
			Outcome: func(b *api.MiniDBBackup) retention.Outcome { return outcomes[b.Status.Phase] },
		},
		Time:      func(b *api.MiniDBBackup) time.Time { return ptr.Deref(b.Status.CompletedAt, b.CreationTimestamp).Time },
		Finalizer: &collect.Finalizer[*api.MiniDBBackup]{Name: "minidb.example.com/backup-data"},
	})
	if err != nil {
		return err
	}
	return backups.Collection[*api.MiniDBBackup]{Name: "minidb-backups", Collector: c}.SetupWithManager(mgr)
}
