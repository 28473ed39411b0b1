package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	// The stores a bucket URL may name: each provider links its cloud's SDK.
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/azurestore" // azblob://
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/gcsstore"   // gs://
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/s3store"    // s3://
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/pool"
	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/crt/backups"
	"github.com/groundskeeper-io/groundskeeper/examples/backup-entry/api"
)

// controllerOptions are the flags of the real controller.
type controllerOptions struct {
	grace  time.Duration
	dryRun bool
	// quota is a pool's bucket's most entries, per provider (--quota).
	quota pool.Limits
	// installation names this installation among those whose pools may
	// share a store's account (--installation; pool.Grow.Installation);
	// setupControllers takes the UID of the kube-system namespace when it
	// is empty.
	installation string
	// Tests only: wrap wraps the manager's client (cached reads, writes)
	// and API reader (fresh reads) to scope the controller or plant bugs.
	wrap func(client.Client, client.Reader) (client.Client, client.Reader)
}

// scheme holds the types the manager's client reads: Kubernetes' own and
// the buckets and entries.
var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(api.AddToScheme(scheme))
}

// setupControllers adds the entry and bucket controllers to mgr
// (crt/backups.Sharing: one worker each). Entries and buckets are listed
// from the cache; the reads a decision rests on (share's Get) come from
// the API server: an entry's before its data is deleted or its pool place
// freed, a bucket's before an entry is admitted to it and at each step of
// a pool's deletion of an empty bucket, and every bucket (listed fresh)
// where a migration's source is compared with them.
func setupControllers(mgr ctrl.Manager, o controllerOptions) error {
	cl, live := mgr.GetClient(), client.Reader(mgr.GetAPIReader())
	if o.wrap != nil {
		cl, live = o.wrap(cl, live)
	}
	entries, buckets := backups.Objects[*api.BackupEntry](cl, live), backups.Objects[*api.BackupBucket](cl, live)
	if o.installation == "" {
		// The cluster's identity: two clusters whose pools share a
		// store's account give their buckets store names of their own.
		var ns corev1.Namespace
		if err := mgr.GetAPIReader().Get(context.Background(), client.ObjectKey{Name: metav1.NamespaceSystem}, &ns); err != nil {
			return fmt.Errorf("--installation not given, and the UID of namespace %s not read: %w", metav1.NamespaceSystem, err)
		}
		o.installation = string(ns.UID)
	}
	r, err := newController(deps{
		entries: entries, buckets: buckets, secrets: crt.Secrets(mgr.GetAPIReader()), clk: clock.RealClock{},
		events:       crt.Events(mgr.GetEventRecorder("backup-entry")),
		createBucket: func(ctx context.Context, b *api.BackupBucket) error { return cl.Create(ctx, b) },
		liveEntries:  backups.LiveList[*api.BackupEntry](mgr.GetScheme(), live, ""),
		liveBuckets:  backups.LiveList[*api.BackupBucket](mgr.GetScheme(), live, ""),
		writers: backups.DeploymentWriter{Client: cl, Reader: live,
			PausedAnnotation: api.PausedReplicasAnnotation, LocationAnnotation: api.BackupLocationAnnotation},
	}, o)
	if err != nil {
		return err
	}
	return backups.Sharing[*api.BackupEntry, *api.BackupBucket]{Name: "backup", Reconciler: r, Reader: cl}.SetupWithManager(mgr)
}
