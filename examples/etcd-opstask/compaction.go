// Snapshot compaction, as etcd-backup-restore's compactor does it: the
// newest full snapshot is restored into a temporary etcd member (embedded,
// in a temporary directory, on loopback), the delta snapshots after it are
// applied in order, and the member's compacted and defragmented database is
// the new full snapshot. It needs the backup bucket only, not the live etcd.

package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"gocloud.dev/blob"

	"github.com/groundskeeper-io/groundskeeper/opstask"
)

// chain is the newest full snapshot of a bucket and the delta snapshots
// after it, verified: the full snapshot's SHA-256, each delta's SHA-256 and
// events, and the revisions, each delta starting where the one before it
// ended.
type chain struct {
	Full    snapshotKey
	Deltas  []snapshotKey
	Bytes   int64 // the size of all of them in the bucket
	Changes int   // events in the deltas
}

// Revision is the last revision the chain covers.
func (c *chain) Revision() int64 {
	if len(c.Deltas) == 0 {
		return c.Full.EndRev
	}
	return c.Deltas[len(c.Deltas)-1].EndRev
}

func (c *chain) String() string {
	if len(c.Deltas) == 0 {
		return fmt.Sprintf("%s (revision %d)", c.Full.Key, c.Full.EndRev)
	}
	return fmt.Sprintf("%s and %d delta snapshots up to revision %d (%d changes)", c.Full.Key, len(c.Deltas), c.Revision(), c.Changes)
}

// latestChain lists b and verifies its newest chain; it fails with code
// NoFullSnapshot or CorruptBackup.
func latestChain(ctx context.Context, b *blob.Bucket, name string) (*chain, error) {
	snaps, err := listSnapshots(ctx, b)
	if err != nil {
		return nil, err
	}
	base := -1
	for i, s := range snaps {
		if s.Kind == "Full" {
			base = i
		}
	}
	if base < 0 {
		return nil, opstask.WithCode(codeNoBase, fmt.Errorf("etcd %s has no full snapshot in its backup store", name))
	}
	c := &chain{Full: snaps[base], Deltas: snaps[base+1:]}
	n, err := verifyFull(ctx, b, c.Full.Key)
	if err != nil {
		return nil, opstask.WithCode(codeCorruptBackup, err)
	}
	c.Bytes += n
	next := c.Full.EndRev + 1
	for _, d := range c.Deltas {
		if d.StartRev != next {
			return nil, opstask.WithCode(codeCorruptBackup, fmt.Errorf("%s starts at revision %d, want %d: revisions are missing after %s", d.Key, d.StartRev, next, c.Full.Key))
		}
		events, size, err := readDelta(ctx, b, d)
		if err != nil {
			return nil, opstask.WithCode(codeCorruptBackup, err)
		}
		next, c.Changes, c.Bytes = d.EndRev+1, c.Changes+len(events), c.Bytes+size
	}
	return c, nil
}

// deltaBytes encodes a delta snapshot: one JSON event a line, then the
// SHA-256 of the lines, as etcd appends one to a full snapshot.
func deltaBytes(events []Event) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, e := range events {
		if err := enc.Encode(e); err != nil {
			return nil, err
		}
	}
	sum := sha256.Sum256(buf.Bytes())
	return append(buf.Bytes(), sum[:]...), nil
}

// readDelta reads a delta snapshot and checks its SHA-256 and that every
// event belongs to its revisions, in order. It holds one delta in memory.
func readDelta(ctx context.Context, b *blob.Bucket, s snapshotKey) ([]Event, int64, error) {
	data, err := b.ReadAll(ctx, s.Key)
	if err != nil {
		return nil, 0, fmt.Errorf("read %s: %w", s.Key, err)
	}
	if len(data) < sha256.Size {
		return nil, 0, fmt.Errorf("%s: %d bytes, shorter than its SHA-256: the snapshot is corrupt", s.Key, len(data))
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, 0, fmt.Errorf("%s: SHA-256 does not match its content: the snapshot is corrupt", s.Key)
	}
	var events []Event
	dec := json.NewDecoder(bytes.NewReader(body))
	last := s.StartRev
	for dec.More() {
		var e Event
		if err := dec.Decode(&e); err != nil || e.ModRevision < last || e.ModRevision > s.EndRev || (e.Type != "PUT" && e.Type != "DELETE") {
			return nil, 0, fmt.Errorf("%s event %d: not an event of revisions %d-%d in order (%v)", s.Key, len(events)+1, s.StartRev, s.EndRev, err)
		}
		last = e.ModRevision
		events = append(events, e)
	}
	if len(events) > 0 && last != s.EndRev {
		return nil, 0, fmt.Errorf("%s ends at revision %d, its name says %d: the snapshot is incomplete", s.Key, last, s.EndRev)
	}
	return events, int64(len(data)), nil
}

// compacted is a full snapshot written by compactChain.
type compacted struct {
	Path              string // the snapshot file: etcd's format, a bbolt file and its SHA-256
	Revision          int64
	Bytes             int64
	SHA256            string
	MD5               []byte
	DBBefore, DBAfter int64 // the temporary member's database before and after compaction and defragmentation
}

// compactChain restores c from b into a temporary etcd member in dir,
// applies its deltas (each revision one transaction, checked to land on
// its revision), compacts and defragments the member and saves its
// database as a new full snapshot in dir.
func compactChain(ctx context.Context, b *blob.Bucket, c *chain, dir string) (*compacted, error) {
	full := filepath.Join(dir, "full.db")
	if err := download(ctx, b, c.Full.Key, full); err != nil {
		return nil, err
	}
	e, err := startTemporaryMember(ctx, full, filepath.Join(dir, "member"))
	if err != nil {
		return nil, err
	}
	defer e.Close()
	ep := e.Clients[0].Addr().String()
	// A client over loopback: the in-process one (v3client) cannot
	// defragment.
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 10 * time.Second, Logger: zap.NewNop(), MaxCallSendMsgSize: maxApplyBytes + 1<<20})
	if err != nil {
		return nil, fmt.Errorf("temporary etcd: %w", err)
	}
	defer cli.Close()

	got, err := cli.Get(ctx, "\x00", clientv3.WithCountOnly())
	if err != nil {
		return nil, fmt.Errorf("temporary etcd: %w", err)
	}
	// A full snapshot may hold writes made after the revision in its name
	// was read: those events of the first delta are in it already.
	rev := got.Header.Revision
	for _, d := range c.Deltas {
		events, _, err := readDelta(ctx, b, d)
		if err != nil {
			return nil, opstask.WithCode(codeCorruptBackup, err)
		}
		if rev, err = applyDelta(ctx, cli, d, events, rev); err != nil {
			return nil, err
		}
	}
	// More than the chain's revision: the full snapshot held writes after
	// the last delta's (it was taken while etcd was written).
	if rev < c.Revision() {
		return nil, opstask.WithCode(codeCorruptBackup, fmt.Errorf("the restored chain ends at revision %d, want %d", rev, c.Revision()))
	}

	out := &compacted{Path: filepath.Join(dir, "compacted.db"), Revision: rev}
	if st, err := cli.Status(ctx, ep); err == nil {
		out.DBBefore = st.DbSize
	}
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return nil, fmt.Errorf("temporary etcd: compact at revision %d: %w", rev, err)
	}
	if _, err := cli.Defragment(ctx, ep); err != nil {
		return nil, fmt.Errorf("temporary etcd: defragment: %w", err)
	}
	if st, err := cli.Status(ctx, ep); err == nil {
		out.DBAfter = st.DbSize
	}
	if err := saveSnapshot(ctx, cli, out); err != nil {
		return nil, err
	}
	return out, nil
}

// applyDelta applies events, grouped by revision, one transaction a
// revision, skipping those at or below rev, and returns the new revision.
// A transaction that lands on another revision than its events' means the
// delta does not continue what was restored.
func applyDelta(ctx context.Context, cli *clientv3.Client, d snapshotKey, events []Event, rev int64) (int64, error) {
	for i := 0; i < len(events); {
		j, ops := i, []clientv3.Op(nil)
		for ; j < len(events) && events[j].ModRevision == events[i].ModRevision; j++ {
			if events[j].Type == "PUT" {
				ops = append(ops, clientv3.OpPut(string(events[j].Key), string(events[j].Value)))
			} else {
				ops = append(ops, clientv3.OpDelete(string(events[j].Key)))
			}
		}
		want := events[i].ModRevision
		i = j
		if want <= rev {
			continue
		}
		resp, err := cli.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return rev, fmt.Errorf("temporary etcd: apply revision %d of %s: %w", want, d.Key, err)
		}
		if resp.Header.Revision != want {
			return rev, opstask.WithCode(codeCorruptBackup, fmt.Errorf("%s: revision %d applied as %d: the delta does not continue the restored revisions", d.Key, want, resp.Header.Revision))
		}
		rev = want
	}
	return rev, nil
}

// maxApplyBytes bounds the transaction of one revision on the temporary
// member.
const maxApplyBytes = 256 << 20

// startTemporaryMember restores the snapshot file into dataDir (etcdutl's
// restore) and starts an embedded single-member etcd on it, on loopback
// ports of its own.
func startTemporaryMember(ctx context.Context, snapshotPath, dataDir string) (*embed.Etcd, error) {
	ports, err := loopbackURLs(2)
	if err != nil {
		return nil, err
	}
	const name = "compactor"
	err = snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath: snapshotPath, Name: name, OutputDataDir: dataDir,
		PeerURLs: []string{ports[1].String()}, InitialCluster: name + "=" + ports[1].String(), InitialClusterToken: name,
	})
	if err != nil {
		return nil, opstask.WithCode(codeCorruptBackup, fmt.Errorf("restore %s: %w", filepath.Base(snapshotPath), err))
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = name, dataDir
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = ports[:1], ports[:1]
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = ports[1:], ports[1:]
	cfg.InitialCluster = name + "=" + ports[1].String()
	// Quiet: it logs errors when it is closed.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.UnsafeNoFsync = true // a scratch member: the snapshot is what counts
	// One revision is one transaction, and one range delete of the live
	// etcd may have deleted more keys than a transaction may name (128 by
	// default), in more bytes than a request may carry.
	cfg.MaxTxnOps = 1 << 20
	cfg.MaxRequestBytes = maxApplyBytes
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start temporary etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("temporary etcd: %w", err)
	case <-ctx.Done():
		e.Close()
		return nil, context.Cause(ctx)
	case <-time.After(time.Minute):
		e.Close()
		return nil, fmt.Errorf("temporary etcd not ready in a minute")
	}
}

// saveSnapshot writes the member's snapshot to out.Path, recording its
// size and checksums.
func saveSnapshot(ctx context.Context, cli *clientv3.Client, out *compacted) error {
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("temporary etcd: snapshot: %w", err)
	}
	defer rc.Close()
	f, err := os.Create(out.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	sh, m5 := sha256.New(), md5.New()
	n, err := io.Copy(io.MultiWriter(f, sh, m5), rc)
	if err != nil {
		return fmt.Errorf("temporary etcd: snapshot after %d bytes: %w", n, err)
	}
	out.Bytes, out.SHA256, out.MD5 = n, hex.EncodeToString(sh.Sum(nil)), m5.Sum(nil)
	return f.Close()
}

// download copies key of b to the file path.
func download(ctx context.Context, b *blob.Bucket, key, path string) error {
	r, err := b.NewReader(ctx, key, nil)
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	defer r.Close()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.Copy(f, r); err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	return f.Close()
}

// uploadFile uploads the file path as key with its MD5, which the store
// checks where it can, then reads it back and checks etcd's SHA-256.
func uploadFile(ctx context.Context, b *blob.Bucket, key, path string, md5sum []byte) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	err = upload(ctx, b, key, &blob.WriterOptions{ContentMD5: md5sum}, func(w io.Writer) error {
		_, err := io.Copy(w, f)
		return err
	})
	if err != nil {
		return err
	}
	if _, err := verifyFull(ctx, b, key); err != nil {
		return fmt.Errorf("uploaded %s: %w", key, err)
	}
	return nil
}

// loopbackURLs returns n http URLs on loopback ports that were free.
func loopbackURLs(n int) ([]url.URL, error) {
	var out []url.URL
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		out = append(out, url.URL{Scheme: "http", Host: l.Addr().String()})
		defer l.Close()
	}
	return out, nil
}

// compactSnapshots compacts the newest chain of the task's etcd into a new
// full snapshot. The snapshots it read stay: only retention deletes
// snapshots.
func (o *operator) compactSnapshots(ctx context.Context, run *opstask.Run) error {
	name := run.Task.Spec.Target
	b, err := o.targets[name].Backups(ctx)
	if err != nil {
		return err
	}
	defer b.Close()
	start := o.clock.Now()
	c, err := latestChain(ctx, b, name)
	if err != nil {
		return err
	}
	if len(c.Deltas) == 0 {
		return run.Progress(ctx, fmt.Sprintf("%s verified (SHA-256 matches); no delta snapshots after it: nothing to compact", c.Full.Key))
	}
	if err := run.Progress(ctx, c.String()+" verified; compacting"); err != nil {
		return err
	}
	compact := o.compact
	if compact == nil {
		compact = compactChain
	}
	dir, err := os.MkdirTemp("", "etcd-compaction-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	out, err := compact(ctx, b, c, dir)
	if err != nil {
		return err
	}
	key := snapshotName("Full", 0, out.Revision, o.clock.Now(), false)
	if err := uploadFile(ctx, b, key, out.Path, out.MD5); err != nil {
		return err
	}
	return run.Progress(ctx, fmt.Sprintf("compacted %s into %s: revisions %d-%d, %d bytes → %d bytes (database %s → %s compacted and defragmented), SHA-256 %s, in %s",
		c, key, c.Full.StartRev, out.Revision, c.Bytes, out.Bytes, mb(out.DBBefore), mb(out.DBAfter), out.SHA256[:16], o.clock.Since(start).Round(time.Millisecond)))
}
