// What the task kinds do on etcd and in the backup buckets: the executors,
// the preconditions that ask the etcd cluster for its health, how a bucket
// is opened, and the types they act on. kinds.go registers them with
// opstask.

package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"gocloud.dev/blob"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/examples/etcd-opstask/api"
	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/retention"
)

// Target is one etcd cluster the operator serves, under the name tasks give
// in spec.etcdName.
type Target struct {
	Etcd Etcd
	// Backups opens the cluster's backup bucket (prefixed to its backups)
	// for one task, which closes it; nil when the cluster has no backups
	// configured.
	Backups func(ctx context.Context) (*blob.Bucket, error)
	// Members runs the cluster's members, for a recovery from a loss of
	// quorum (recovery.go); nil when this operator does not run them.
	Members Members
}

// operator holds what the task kinds act on.
type operator struct {
	targets map[string]*Target
	// openStore opens a copyBackups store of a task in namespace, the bucket
	// prefixed with the store's prefix.
	openStore func(ctx context.Context, namespace string, s api.StoreSpec) (*blob.Bucket, error)
	clock     clock.WithTicker
	// dryRun: maintenance (compaction drops the key history for good,
	// defragmentation blocks each member while it runs) is not done; the
	// task fails with code DryRun and says what would have been done.
	dryRun bool
	// compact compacts a chain of snapshots into a new full snapshot in
	// dir; nil means compactChain (a temporary embedded etcd).
	compact func(ctx context.Context, b *blob.Bucket, c *chain, dir string) (*compacted, error)
}

// Error codes of the etcd checks and the executors, recorded in
// status.lastErrors.
const (
	codeNoQuorum        opstask.ErrorCode = "NoQuorum"
	codeNotReady        opstask.ErrorCode = "EtcdNotReady"
	codeSingleMember    opstask.ErrorCode = "SingleMemberCluster"
	codeQuorumPresent   opstask.ErrorCode = "QuorumPresent"
	codeNoBase          opstask.ErrorCode = "NoFullSnapshot"
	codeCompacted       opstask.ErrorCode = "RevisionsCompacted"
	codeCorruptBackup   opstask.ErrorCode = "CorruptBackup"
	codeDryRun          opstask.ErrorCode = "DryRun"
	snapshotFinalSuffix                   = ".final"
)

func (o *operator) hasQuorum(ctx context.Context, name string, t *Target) error {
	if h := t.Etcd.Health(ctx); !h.Quorum() {
		return opstask.Unmet(codeNoQuorum, fmt.Sprintf("etcd %s has no quorum: %s", name, describe(h)))
	}
	return nil
}

func (o *operator) isReady(ctx context.Context, name string, t *Target) error {
	if h := t.Etcd.Health(ctx); len(h.Answering) < h.Members {
		return opstask.Unmet(codeNotReady, fmt.Sprintf("etcd %s is not ready: %s", name, describe(h)))
	}
	return nil
}

func (o *operator) multiMember(ctx context.Context, name string, t *Target) error {
	if h := t.Etcd.Health(ctx); h.Members < 2 {
		return opstask.Unmet(codeSingleMember, fmt.Sprintf("etcd %s has a single member: its backup-restore sidecar restores it, no recovery task is needed", name))
	}
	return nil
}

func (o *operator) lostQuorum(ctx context.Context, name string, t *Target) error {
	if h := t.Etcd.Health(ctx); h.Quorum() {
		return opstask.Unmet(codeQuorumPresent, fmt.Sprintf("etcd %s has quorum (%s): there is nothing to recover", name, describe(h)))
	}
	return nil
}

func describe(h Health) string {
	s := fmt.Sprintf("%d of %d members answer", len(h.Answering), h.Members)
	if len(h.Answering) > 0 && !h.Leader {
		s += ", none knows a leader"
	}
	if len(h.Errors) > 0 {
		s += " (" + strings.Join(h.Errors, "; ") + ")"
	}
	return s
}

// Snapshot keys follow etcd-backup-restore: Full-<startRev>-<endRev>-<unix>
// and Delta-<startRev>-<endRev>-<unix>, a final full snapshot with ".final".
type snapshotKey struct {
	Key              string
	Kind             string // Full or Delta
	StartRev, EndRev int64
	Final            bool
}

func snapshotName(kind string, start, end int64, at time.Time, final bool) string {
	k := fmt.Sprintf("%s-%08d-%08d-%d", kind, start, end, at.Unix())
	if final {
		k += snapshotFinalSuffix
	}
	return k
}

func parseSnapshotKey(key string) (snapshotKey, bool) {
	s := snapshotKey{Key: key}
	name := strings.TrimSuffix(key, snapshotFinalSuffix)
	s.Final = name != key
	var unix int64
	if n, err := fmt.Sscanf(name, "Full-%d-%d-%d", &s.StartRev, &s.EndRev, &unix); err == nil && n == 3 {
		s.Kind = "Full"
		return s, true
	}
	if n, err := fmt.Sscanf(name, "Delta-%d-%d-%d", &s.StartRev, &s.EndRev, &unix); err == nil && n == 3 {
		s.Kind = "Delta"
		return s, true
	}
	return s, false
}

// listSnapshots returns the snapshots in b ordered by their last revision.
func listSnapshots(ctx context.Context, b *blob.Bucket) ([]snapshotKey, error) {
	var out []snapshotKey
	it := b.List(nil)
	for {
		obj, err := it.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("list backups: %w", err)
		}
		if s, ok := parseSnapshotKey(obj.Key); ok {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].EndRev != out[j].EndRev {
			return out[i].EndRev < out[j].EndRev
		}
		// A full snapshot covers the delta that ends where it does (a
		// compacted one): it comes after it, so that the newest chain
		// starts with it.
		return out[i].Kind != "Full" && out[j].Kind == "Full"
	})
	return out, nil
}

func (o *operator) snapshot(ctx context.Context, run *opstask.Run) error {
	cfg, err := api.SnapshotConfig(run.Task)
	if err != nil {
		return err
	}
	name := run.Task.Spec.Target
	t := o.targets[name]
	b, err := t.Backups(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	final := cfg.IsFinal != nil && *cfg.IsFinal
	if cfg.Type == api.SnapshotTypeFull {
		rev, err := t.Etcd.Revision(ctx)
		if err != nil {
			return err
		}
		key := snapshotName("Full", 0, rev, o.clock.Now(), final)
		var n int64
		err = upload(ctx, b, key, nil, func(w io.Writer) (err error) {
			n, err = t.Etcd.Snapshot(ctx, w)
			return err
		})
		if err != nil {
			return err
		}
		return run.Progress(ctx, fmt.Sprintf("full snapshot of %s at revision %d uploaded as %s (%d bytes)", name, rev, key, n))
	}

	// A delta snapshot holds the key changes since the newest snapshot.
	snaps, err := listSnapshots(ctx, b)
	if err != nil {
		return err
	}
	if len(snaps) == 0 {
		return opstask.WithCode(codeNoBase, fmt.Errorf("etcd %s has no full snapshot for a delta snapshot to follow", name))
	}
	from := snaps[len(snaps)-1].EndRev + 1
	var events []Event
	rev, err := t.Etcd.Events(ctx, from, func(e Event) error { events = append(events, e); return nil })
	if errors.Is(err, rpctypes.ErrCompacted) {
		return opstask.WithCode(codeCompacted, fmt.Errorf("%w; take a full snapshot", err))
	}
	if err != nil {
		return err
	}
	if len(events) == 0 {
		return run.Progress(ctx, fmt.Sprintf("no changes in %s since revision %d: no delta snapshot written", name, from-1))
	}
	key := snapshotName("Delta", from, rev, o.clock.Now(), false)
	data, err := deltaBytes(events)
	if err != nil {
		return err
	}
	err = upload(ctx, b, key, nil, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return err
	}
	return run.Progress(ctx, fmt.Sprintf("delta snapshot of %s, revisions %d-%d (%d changes), uploaded as %s", name, from, rev, len(events), key))
}

// upload writes key with fill; the object appears only if fill succeeds.
func upload(ctx context.Context, b *blob.Bucket, key string, opts *blob.WriterOptions, fill func(io.Writer) error) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := b.NewWriter(wctx, key, opts)
	if err != nil {
		return fmt.Errorf("upload %s: %w", key, err)
	}
	if err := fill(w); err != nil {
		cancel() // aborts the upload
		w.Close()
		return fmt.Errorf("upload %s: %w", key, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("upload %s: %w", key, err)
	}
	return nil
}

func (o *operator) maintain(ctx context.Context, run *opstask.Run) error {
	cfg, err := opstask.DecodeConfig[api.OnDemandMaintenanceConfig](run.Task, "onDemandMaintenance")
	if err != nil {
		return err
	}
	name := run.Task.Spec.Target
	e := o.targets[name].Etcd
	if o.dryRun {
		var would []string
		if cfg.MaintenanceType.EtcdCompaction {
			rev, err := e.Revision(ctx)
			if err != nil {
				return err
			}
			would = append(would, fmt.Sprintf("compact %s at revision %d, dropping the key history before it", name, rev))
		}
		if cfg.MaintenanceType.EtcdDefragmentation {
			would = append(would, fmt.Sprintf("defragment the members of %s one by one: %s", name, strings.Join(e.Health(ctx).Answering, ", ")))
		}
		return opstask.WithCode(codeDryRun, fmt.Errorf("dry run (--dry-run), nothing done: would %s", strings.Join(would, "; would ")))
	}
	var done []string
	if cfg.MaintenanceType.EtcdCompaction {
		rev, err := e.Compact(ctx)
		if err != nil {
			return err
		}
		done = append(done, fmt.Sprintf("compacted %s at revision %d", name, rev))
		if err := run.Progress(ctx, strings.Join(done, "; ")); err != nil {
			return err
		}
	}
	if cfg.MaintenanceType.EtcdDefragmentation {
		err := e.Defragment(ctx, func(d Defragmented) error {
			done = append(done, fmt.Sprintf("defragmented %s: %s → %s", d.Member, mb(d.Before), mb(d.After)))
			return run.Progress(ctx, strings.Join(done, "; "))
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }

// verifyFull checks an etcd snapshot's trailing SHA-256 of its content and
// returns its size.
func verifyFull(ctx context.Context, b *blob.Bucket, key string) (int64, error) {
	r, err := b.NewReader(ctx, key, nil)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", key, err)
	}
	defer r.Close()
	h := sha256.New()
	// Hash all but the last 32 bytes, which are the expected sum.
	var tail []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		tail = append(tail, buf[:n]...)
		if len(tail) > sha256.Size {
			h.Write(tail[:len(tail)-sha256.Size])
			tail = append(tail[:0], tail[len(tail)-sha256.Size:]...)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", key, err)
		}
	}
	if len(tail) < sha256.Size || !bytes.Equal(h.Sum(nil), tail) {
		return 0, fmt.Errorf("%s: SHA-256 does not match its content: the snapshot is corrupt", key)
	}
	return r.Size(), nil
}

func (o *operator) copyBackups(ctx context.Context, run *opstask.Run) error {
	cfg, err := opstask.DecodeConfig[api.CopyBackupsConfig](run.Task, "copyBackups")
	if err != nil {
		return err
	}
	ns := run.Task.Namespace
	src, err := o.openStore(ctx, ns, cfg.SourceStore)
	if err != nil {
		return fmt.Errorf("spec.config.copyBackups.sourceStore: %w", err)
	}
	defer src.Close()
	dst, err := o.openStore(ctx, ns, cfg.TargetStore)
	if err != nil {
		return fmt.Errorf("spec.config.copyBackups.targetStore: %w", err)
	}
	defer dst.Close()
	opts := &backupstore.CopyOptions{
		// Outside the backups, so that it is never taken for one.
		ManifestKey: ".copy-manifest.json",
		Clock:       o.clock,
		Progress: func(p backupstore.CopyProgress) {
			if done := p.Copied + p.Skipped + p.NotFound + p.Failed; done%25 == 0 {
				_ = run.Progress(ctx, fmt.Sprintf("%d of %d objects done", done, p.Selected))
			}
		},
	}
	if cfg.MaxBackupAge != nil {
		if opts.MaxBackupAge, err = retention.Days(int64(*cfg.MaxBackupAge)); err != nil {
			return fmt.Errorf("spec.config.copyBackups.maxBackupAge: %w", err)
		}
	}
	if cfg.MaxBackups != nil {
		opts.MaxBackups = int(*cfg.MaxBackups)
	}
	res, err := backupstore.CopyBackups(ctx, src, dst, opts)
	if err != nil {
		return err
	}
	return run.Progress(ctx, fmt.Sprintf("copied %d objects (%d bytes) from %s to %s; %d already there, %d left out by maxBackupAge/maxBackups",
		res.Copied, res.Bytes, storeName(cfg.SourceStore), storeName(cfg.TargetStore), res.Skipped, res.Excluded))
}

func storeName(s api.StoreSpec) string {
	return s.Provider + ":" + s.Container + "/" + s.Prefix
}

// openBucket opens the bucket rawURL with the credentials of the Secret
// namespace/secret, read through secrets, or with the provider's ambient
// credentials when secret is empty.
func openBucket(ctx context.Context, secrets backupstore.SecretGetter, rawURL, namespace, secret string) (*blob.Bucket, error) {
	var creds *backupstore.Credentials
	if secret != "" {
		scheme, err := backupstore.Scheme(rawURL)
		if err != nil {
			return nil, err
		}
		if creds, err = backupstore.LoadCredentials(ctx, secrets, namespace, secret, scheme); err != nil {
			return nil, err
		}
	}
	return backupstore.OpenBucket(ctx, rawURL, creds)
}

// storeOpener returns the operator's openStore: a copyBackups store opened
// with the credentials of its secretRef in the task's namespace.
func storeOpener(secrets backupstore.SecretGetter) func(ctx context.Context, namespace string, s api.StoreSpec) (*blob.Bucket, error) {
	return func(ctx context.Context, namespace string, s api.StoreSpec) (*blob.Bucket, error) {
		scheme, err := providerScheme(s.Provider)
		if err != nil {
			return nil, err
		}
		rawURL := scheme + "://" + s.Container
		if s.Prefix != "" {
			rawURL += "?prefix=" + url.QueryEscape(s.Prefix)
		}
		return openBucket(ctx, secrets, rawURL, namespace, s.SecretRef)
	}
}

// close closes the etcd clients.
func (o *operator) close() {
	for _, t := range o.targets {
		if c, ok := t.Etcd.(io.Closer); ok {
			_ = c.Close()
		}
	}
}

// providerScheme maps etcd-druid's store providers to gocloud URL schemes.
func providerScheme(provider string) (string, error) {
	switch provider {
	case "S3", "aws":
		return "s3", nil
	case "GCS", "gcp":
		return "gs", nil
	case "ABS", "azure":
		return "azblob", nil
	case "Local":
		return "file", nil
	}
	return "", fmt.Errorf("%q is not supported (S3, GCS, ABS, Local)", provider)
}
