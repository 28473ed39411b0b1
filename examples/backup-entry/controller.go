package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"gocloud.dev/blob"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/migrate"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/pool"
	"github.com/groundskeeper-io/groundskeeper/crt/backups"
	"github.com/groundskeeper-io/groundskeeper/examples/backup-entry/api"
)

// markerKey is written under an entry's prefix when the entry is admitted:
// it makes the prefix exist before the cluster's first backup, so that
// share.Quota counts the entry (the seed's "creation of directory
// specific to shoot in backup bucket"), and says whose prefix it is.
const markerKey = "backup-entry.json"

// deps are what the controller reads and writes: the manager's clients in
// a cluster, the scenario's simulated API server and in-memory buckets.
type deps struct {
	entries collect.Objects[*api.BackupEntry]
	buckets collect.Objects[*api.BackupBucket]
	// createBucket creates a pool's next BackupBucket (AlreadyExists if it
	// exists); liveEntries and liveBuckets list the entries and the
	// buckets fresh from the API server.
	createBucket func(context.Context, *api.BackupBucket) error
	liveEntries  func(context.Context) ([]*api.BackupEntry, error)
	liveBuckets  func(context.Context) ([]*api.BackupBucket, error)
	secrets      backupstore.SecretGetter
	events       collect.EventRecorder
	clk          clock.WithTicker
	// open opens a bucket in a store; nil is backupstore.OpenBucket.
	open func(ctx context.Context, url string, creds *backupstore.Credentials) (*blob.Bucket, func() error, error)
	// writers updates and reads the migrations' writer Deployments.
	writers backups.DeploymentWriter
}

// newController is the controller (share.Share, in a pool.Pool, in a
// migrate.Controller): an entry that names no bucket is placed in its pool,
// the BackupBuckets of its spec.provider and spec.region, --quota entries
// each; when all are full the pool grows by a BackupBucket made from its
// first (pool.Grow: <provider>-<region>-<n>, the store's bucket of that
// name and the installation's hash created, with an owner marker naming
// the BackupBucket's UID, before an entry is admitted to it; a store
// bucket that existed without that marker is not the pool's, takes no
// entry and is never deleted); a pool bucket other than the first by name
// that has had no entry for the deletion grace period is deleted, the
// store's bucket and its data first, if its marker names it. An entry is admitted
// to its bucket while it has room, with a marker under its prefix; a
// bucket is kept while entries name it; a deleted entry's prefix is
// deleted by the collector (Finalize); an admitted entry with
// spec.migrateFrom is migrated into its prefix, one step per reconcile,
// recorded in status.migration, its writer Deployment paused meanwhile
// and switched to "<bucket>/<prefix>", the legacy objects deleted the
// deletion grace period after the switch once the prefix holds every one
// of them; a spec.migrateFrom that names the store bucket of any
// BackupBucket is refused. The manager runs it with
// crt/backups.Share, the scenario by hand.
func newController(d deps, o controllerOptions) (share.Reconciler[*api.BackupEntry, *api.BackupBucket], error) {
	// The collector deletes a deleted entry's prefix (Finalize) grace
	// after its deletion timestamp (Gardener's deletionGracePeriod), at
	// once with the force annotation or for an entry never admitted, with
	// the store's lifecycle rule as a backstop meanwhile; the finalizer
	// stays until the prefix is gone.
	collector, err := collect.New(collect.Config[*api.BackupEntry]{
		Objects: d.entries, Secrets: d.secrets, Recorder: d.events, Clock: d.clk, Open: d.open,
		Location: entryLocation(d.buckets),
		Finalizer: &collect.Finalizer[*api.BackupEntry]{Name: api.Finalizer, GracePeriod: o.grace, Backstop: true,
			Force: func(e *api.BackupEntry) bool {
				return e.Annotations[api.ForceDeletionAnnotation] == "true" || e.Status.Prefix == ""
			},
			OnGrace: func(e *api.BackupEntry, at time.Time) { e.Status.DeleteAfter = &metav1.Time{Time: at} },
		},
		DryRun:        collect.DryRun{Enabled: o.dryRun, Report: true},
		ConditionType: api.ConditionPrefixDeleted,
		Reasons:       collect.Reasons{DeletionFailed: "StoreError", Collected: "PrefixDeleted"},
	})
	if err != nil {
		return nil, err
	}
	s, err := share.New(share.Config[*api.BackupEntry, *api.BackupBucket]{
		Entries: d.entries, Buckets: d.buckets, Collector: collector, Recorder: d.events, Clock: d.clk,
		Bucket: func(e *api.BackupEntry) (string, string) { return "", e.Spec.BucketName },
		// A pool's bucket holds its provider's quota (at least 1), any
		// other its spec.maxEntries.
		Limit:     func(b *api.BackupBucket) int { return cmp.Or(o.quota[b.Spec.Provider], b.Spec.MaxEntries) },
		Prefix:    func(e *api.BackupEntry) *string { return &e.Status.Prefix },
		MarkerKey: markerKey,
		Marker: func(e *api.BackupEntry) []byte {
			m, _ := json.Marshal(map[string]string{"backupEntry": e.Name, "uid": string(e.UID), "shootUID": e.Spec.ShootUID})
			return m
		},
		BucketFinalizer: api.Finalizer,
		Count: func(b *api.BackupBucket, entries, admitted int) {
			b.Status.Entries, b.Status.Admitted = entries, admitted
		},
		Names: share.Names{Bucket: "BackupBucket", Entries: "BackupEntries", BucketField: "spec.bucketName", LimitField: "spec.maxEntries"},
	})
	if err != nil {
		return nil, err
	}
	grow := pool.Grow[*api.BackupBucket]{Buckets: d.buckets, Secrets: d.secrets, Installation: o.installation, Open: d.open,
		Member: func(b *api.BackupBucket) string { return b.Spec.Pool() },
		Store: func(b *api.BackupBucket) (string, string, string) {
			ns, name := b.Spec.SecretRef.Key()
			return b.Spec.URL, ns, name
		},
		New: func(first *api.BackupBucket, name, url string) *api.BackupBucket {
			spec := api.BackupBucketSpec{URL: url, SecretRef: first.Spec.SecretRef, Provider: first.Spec.Provider, Region: first.Spec.Region}
			return &api.BackupBucket{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
		},
	}
	placer, err := pool.New(pool.Config[*api.BackupEntry, *api.BackupBucket]{
		Share: s, Create: d.createBucket, Grower: grow, Member: grow.Member, LiveEntries: d.liveEntries, DeleteEmptyAfter: o.grace, DryRun: o.dryRun,
		Pool: func(e *api.BackupEntry) (string, error) {
			if _, ok := o.quota[e.Spec.Provider]; !ok {
				return "", fmt.Errorf("spec.provider %q has no --quota (--quota=%q)", e.Spec.Provider, o.quota.String())
			}
			return e.Spec.Pool(), nil
		},
		Claims: func(b *api.BackupBucket) *[]string { return &b.Status.Claims },
		Assign: func(e *api.BackupEntry, _, name string) { e.Spec.BucketName = name },
	})
	if err != nil {
		return nil, err
	}
	return migrate.New(migrate.Config[*api.BackupEntry, *api.BackupBucket]{
		Reconciler: placer, Entries: d.entries, Collector: collector, Recorder: d.events, Clock: d.clk,
		Migration: migrate.Migration{GracePeriod: o.grace, DryRun: o.dryRun},
		Prefix:    func(e *api.BackupEntry) string { return e.Status.Prefix },
		Status:    func(e *api.BackupEntry) **migrate.Status { return &e.Status.Migration },
		// A spec.migrateFrom that names a BackupBucket's store bucket (the
		// entry's own, or any other) is refused: SourceIsShared.
		LiveBuckets: d.liveBuckets,
		BucketURL:   func(b *api.BackupBucket) string { return b.Spec.URL },
		Source: func(e *api.BackupEntry) (collect.Location, bool) {
			from := e.Spec.MigrateFrom
			if from == nil {
				return collect.Location{}, false
			}
			loc := collect.Location{URL: from.URL, SecretField: "spec.migrateFrom.secretRef"}
			loc.SecretNamespace, loc.Secret = from.SecretRef.Key()
			return loc, true
		},
		Hooks: func(e *api.BackupEntry) migrate.Hooks {
			w := d.writers
			w.Deployment = client.ObjectKey{Namespace: e.Spec.MigrateFrom.Writer.Namespace, Name: e.Spec.MigrateFrom.Writer.Name}
			return w.Hooks(e.Spec.BucketName + "/" + e.Status.Prefix)
		},
	})
}

// entryLocation is where an entry's prefix is: in the BackupBucket the
// entry names, with that bucket's credentials.
func entryLocation(buckets collect.Objects[*api.BackupBucket]) func(context.Context, *api.BackupEntry) (collect.Location, error) {
	return func(ctx context.Context, e *api.BackupEntry) (collect.Location, error) {
		// An entry its pool has not placed names no bucket, and has no
		// data anywhere (admission comes after placement): its location
		// is none, not an error. The collector reads every entry's
		// location before it deletes one's data, and keeps that data while
		// one cannot be read: an entry waiting for its pool (or never
		// placed: NoPool) would hold up every deletion of the cluster.
		if e.Spec.BucketName == "" && e.Status.Prefix == "" {
			return collect.Location{}, nil
		}
		b, err := buckets.Get(ctx, "", e.Spec.BucketName)
		if apierrors.IsNotFound(err) && e.Status.Prefix == "" {
			return collect.Location{}, nil // never admitted: no data
		}
		if err != nil {
			return collect.Location{}, fmt.Errorf("spec.bucketName %q: %w", e.Spec.BucketName, err)
		}
		// Also for an entry without status.prefix: its marker may have
		// been written by an admission whose status update was lost.
		// Such an entry may name a pool bucket not made in the store
		// (its Secret missing): then it has no data.
		// The marker under the prefix names the entry's UID: only then
		// is the data the entry's (another installation's entry of the
		// same name may have written there). For an entry without
		// status.prefix, a prefix whose marker is not its own was never
		// given to it: it has no data there, and goes.
		prefix, err := e.Status.Prefix, error(nil)
		if prefix == "" {
			prefix, err = share.PrefixOf(e)
		}
		loc := collect.Location{URL: b.Spec.URL, Prefix: prefix, BucketMayBeMissing: e.Status.Prefix == "",
			Owner: string(e.UID), Marker: markerKey, NoDataUnlessOwner: e.Status.Prefix == ""}
		if ref := b.Spec.SecretRef; ref != nil {
			loc.Secret, loc.SecretNamespace = ref.Name, ref.Namespace
			loc.SecretField = fmt.Sprintf("spec.secretRef of BackupBucket %q", b.Name)
		} else if scheme, _ := backupstore.Scheme(b.Spec.URL); scheme != "file" && scheme != "mem" {
			return collect.Location{}, fmt.Errorf("BackupBucket %q: spec.secretRef is required for %s:// URLs", b.Name, scheme)
		}
		return loc, err
	}
}
