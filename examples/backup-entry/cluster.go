package main

import (
	"context"
	"time"

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
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/crt/backups"
	"github.com/groundskeeper-io/groundskeeper/examples/backup-entry/api"
)

// controllerOptions are the flags of the real controller.
type controllerOptions struct {
	grace  time.Duration
	dryRun bool
	// quota is a pool's bucket's most entries, per provider (--quota).
	quota share.Quota
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
// (crt/backups.Share: one worker each). Buckets are read from the cache
// (and listed fresh where a migration's source is compared with them),
// entries from the cache and fresh before their data is deleted.
func setupControllers(mgr ctrl.Manager, o controllerOptions) error {
	cl, live := mgr.GetClient(), client.Reader(mgr.GetAPIReader())
	if o.wrap != nil {
		cl, live = o.wrap(cl, live)
	}
	entries, buckets := backups.Objects[*api.BackupEntry](cl, live), backups.Objects[*api.BackupBucket](cl, cl)
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
	return backups.Share(mgr, "backup", r, &backups.ShareOptions{Reader: cl})
}
