package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/examples/backup-entry/api"
)

// markerKey is written under an entry's prefix when the entry is admitted:
// it makes the prefix exist before the cluster's first backup, so that
// backupstore.Quota counts the entry (the seed's "creation of directory
// specific to shoot in backup bucket"), and says whose prefix it is.
const markerKey = "backup-entry.json"

// eventRecorder records events about the entries and buckets:
// crt.Events(mgr.GetEventRecorder(name)) in a cluster.
type eventRecorder interface {
	Event(object runtime.Object, eventtype, reason, message string)
}

// newShare is the controller: entries admitted to their BackupBucket while
// it has room (spec.maxEntries), a marker under each admitted prefix, the
// bucket kept while entries name it, and a deleted entry's prefix deleted
// by the collector (entryConfig). The manager runs it with
// crt/backups.Share, the scenario by hand.
func newShare(entries collect.Objects[*api.BackupEntry], buckets collect.Objects[*api.BackupBucket], secrets backupstore.SecretGetter, events eventRecorder, clk clock.WithTicker, grace time.Duration, dryRun bool) (*share.Share[*api.BackupEntry, *api.BackupBucket], error) {
	collector, err := collect.New(entryConfig(entries, buckets, secrets, events, clk, grace, dryRun))
	if err != nil {
		return nil, err
	}
	return newShareWith(collector, entries, buckets, events, clk)
}

func newShareWith(collector *collect.Collector[*api.BackupEntry], entries collect.Objects[*api.BackupEntry], buckets collect.Objects[*api.BackupBucket], events eventRecorder, clk clock.PassiveClock) (*share.Share[*api.BackupEntry, *api.BackupBucket], error) {
	return share.New(share.Config[*api.BackupEntry, *api.BackupBucket]{
		Entries: entries, Buckets: buckets, Collector: collector, Recorder: events, Clock: clk,
		Bucket:     func(e *api.BackupEntry) (string, string) { return "", e.Spec.BucketName },
		Limit:      func(b *api.BackupBucket) int { return b.Spec.MaxEntries },
		Prefix:     func(e *api.BackupEntry) *string { return &e.Status.Prefix },
		Conditions: func(e *api.BackupEntry) *[]metav1.Condition { return &e.Status.Conditions },
		MarkerKey:  markerKey,
		Marker: func(e *api.BackupEntry) []byte {
			m, _ := json.Marshal(map[string]string{"backupEntry": e.Name, "uid": string(e.UID), "shootUID": e.Spec.ShootUID})
			return m
		},
		BucketFinalizer:  api.Finalizer,
		BucketConditions: func(b *api.BackupBucket) *[]metav1.Condition { return &b.Status.Conditions },
		Count: func(b *api.BackupBucket, entries, admitted int) {
			b.Status.Entries, b.Status.Admitted = entries, admitted
		},
		Names: share.Names{Bucket: "BackupBucket", Entries: "BackupEntries", BucketField: "spec.bucketName", LimitField: "spec.maxEntries"},
	})
}

// entryConfig is how the collector deletes a deleted entry's prefix
// (collect.Collector.Finalize): the prefix is in the BackupBucket the entry
// names, with that bucket's credentials; it goes grace after the deletion
// timestamp (Gardener's deletionGracePeriod), at once with the force
// annotation or for an entry never admitted, with the store's lifecycle
// rule as a backstop meanwhile; the finalizer stays until it is gone.
func entryConfig(entries collect.Objects[*api.BackupEntry], buckets collect.Objects[*api.BackupBucket], secrets backupstore.SecretGetter, events eventRecorder, clk clock.WithTicker, grace time.Duration, dryRun bool) collect.Config[*api.BackupEntry] {
	return collect.Config[*api.BackupEntry]{
		Objects: entries, Secrets: secrets, Recorder: events, Clock: clk, DryRun: dryRun, ReportDryRun: true,
		Finalizer: api.Finalizer, GracePeriod: grace, Backstop: true,
		Location: func(ctx context.Context, e *api.BackupEntry) (collect.Location, error) {
			b, err := buckets.Get(ctx, "", e.Spec.BucketName)
			if apierrors.IsNotFound(err) && e.Status.Prefix == "" {
				return collect.Location{}, nil // never admitted: no data
			}
			if err != nil {
				return collect.Location{}, fmt.Errorf("spec.bucketName %q: %w", e.Spec.BucketName, err)
			}
			// Also for an entry without status.prefix: its marker may have
			// been written by an admission whose status update was lost.
			prefix, err := backupstore.EntryPrefix("", e.Name)
			loc := collect.Location{URL: b.Spec.URL, Prefix: prefix}
			if ref := b.Spec.SecretRef; ref != nil {
				loc.Secret, loc.SecretNamespace = ref.Name, ref.Namespace
				loc.SecretField = fmt.Sprintf("spec.secretRef of BackupBucket %q", b.Name)
			} else if scheme, _ := backupstore.Scheme(b.Spec.URL); scheme != "file" && scheme != "mem" {
				return collect.Location{}, fmt.Errorf("BackupBucket %q: spec.secretRef is required for %s:// URLs", b.Name, scheme)
			}
			return loc, err
		},
		Force: func(e *api.BackupEntry) bool {
			return e.Annotations[api.ForceDeletionAnnotation] == "true" || e.Status.Prefix == ""
		},
		OnGrace:       func(e *api.BackupEntry, at time.Time) { e.Status.DeleteAfter = &metav1.Time{Time: at} },
		ConditionType: api.ConditionPrefixDeleted,
		Conditions:    func(e *api.BackupEntry) *[]metav1.Condition { return &e.Status.Conditions },
		Reasons:       collect.Reasons{DeletionFailed: "StoreError", Collected: "PrefixDeleted"},
	}
}
