package gluetrial

import (
	"context"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/s3store" // s3://
	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/crt/backups"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/gluetrial/api"
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
		Group: func(b *api.MiniDBBackup) string { return b.Namespace + "/" + b.Spec.Database },
		Policy: func(ctx context.Context, group string) (retention.Policy, error) {
			var db api.MiniDB
			ns, name, _ := strings.Cut(group, "/")
			if err := mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &db); err != nil {
				return nil, err
			}
			return retention.ParsePolicy(db.Spec.Retention)
		},
		Outcome: func(b *api.MiniDBBackup) retention.Outcome { return outcomes[b.Status.Phase] },
		Time: func(b *api.MiniDBBackup) time.Time {
			if t := b.Status.CompletedAt; t != nil {
				return t.Time
			}
			return b.CreationTimestamp.Time
		},
		Conditions: func(b *api.MiniDBBackup) *[]metav1.Condition { return &b.Status.Conditions },
		Finalizer:  "minidb.example.com/backup-data",
	})
	if err != nil {
		return err
	}
	return backups.Collect(mgr, "minidb-backups", c, nil)
}
