package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// backupWorld is one etcd cluster of its own, its client, and an operator
// whose target "main" backs it up to a bucket in a directory.
type backupWorld struct {
	etcd   *testenv.EtcdCluster
	cli    *clientv3.Client
	op     *operator
	bucket string // fileblob directory
}

func newBackupWorld(t testing.TB, members int) *backupWorld {
	w := &backupWorld{etcd: testenv.StartEtcdCluster(t, members), bucket: t.TempDir()}
	cli, err := clientv3.New(clientv3.Config{Endpoints: w.etcd.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	w.cli = cli
	e, err := newEtcdCluster(w.etcd.Endpoints())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	w.op = &operator{clock: clock.RealClock{}, targets: map[string]*Target{"main": {Etcd: e, Backups: w.open}}}
	return w
}

func (w *backupWorld) open(context.Context) (*blob.Bucket, error) {
	return fileblob.OpenBucket(w.bucket, nil)
}

func task(kind, config string) *opstask.Run {
	return &opstask.Run{ID: "test", Task: &opstask.Task{Namespace: "ns", Name: kind, Spec: opstask.Spec{
		Target: "main", Config: map[string]json.RawMessage{kind: json.RawMessage(config)}}}}
}

func (w *backupWorld) snapshot(t testing.TB, typ string) {
	t.Helper()
	if err := w.op.snapshot(context.Background(), task("onDemandSnapshot", `{"type":"`+typ+`"}`)); err != nil {
		t.Fatalf("%s snapshot: %v", typ, err)
	}
}

func (w *backupWorld) keys(t testing.TB) []string {
	t.Helper()
	b, err := w.open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	snaps, err := listSnapshots(context.Background(), b)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range snaps {
		out = append(out, s.Key)
	}
	return out
}

// write applies ops in transactions of 100 (etcd allows 128 a transaction).
func write(t testing.TB, cli *clientv3.Client, ops []clientv3.Op) {
	t.Helper()
	for len(ops) > 0 {
		n := min(len(ops), 100)
		if _, err := cli.Txn(context.Background()).Then(ops[:n]...).Commit(); err != nil {
			t.Fatal(err)
		}
		ops = ops[n:]
	}
}

// churn writes a base of keys, takes a full snapshot, then deltas rounds
// of puts of new keys, overwrites and deletes (single keys and ranges),
// each followed by a delta snapshot.
func (w *backupWorld) churn(t testing.TB, keys, deltas int, rng *rand.Rand) {
	t.Helper()
	key := func(i int) string { return fmt.Sprintf("/registry/k%03d/%06d", i%500, i) }
	var ops []clientv3.Op
	for i := range keys {
		ops = append(ops, clientv3.OpPut(key(i), fmt.Sprintf("v0-%d-%s", i, strings.Repeat("x", rng.IntN(200)))))
	}
	write(t, w.cli, ops)
	w.snapshot(t, "full")
	next := keys
	for d := 1; d <= deltas; d++ {
		ops = ops[:0]
		for range keys / 20 { // new keys
			ops = append(ops, clientv3.OpPut(key(next), fmt.Sprintf("v%d-new", d)))
			next++
		}
		write(t, w.cli, ops)
		ops = ops[:0]
		// Overwrites, some of keys deleted before: distinct keys, as a
		// transaction may not name a key twice.
		for _, i := range rng.Perm(next)[:keys/10] {
			ops = append(ops, clientv3.OpPut(key(i), fmt.Sprintf("v%d-over", d)))
		}
		write(t, w.cli, ops)
		ops = ops[:0]
		for range keys / 50 { // single deletes, one transaction each
			if _, err := w.cli.Delete(context.Background(), key(rng.IntN(next))); err != nil {
				t.Fatal(err)
			}
		}
		// A range delete: many events in one revision, more than etcd's
		// 128 operations a transaction.
		if _, err := w.cli.Delete(context.Background(), fmt.Sprintf("/registry/k%02d", rng.IntN(50)), clientv3.WithPrefix()); err != nil {
			t.Fatal(err)
		}
		w.snapshot(t, "delta")
	}
}

// state reads every key of cli's cluster, with the revision read at.
func state(t testing.TB, cli *clientv3.Client) ([]*mvccpb.KeyValue, int64) {
	t.Helper()
	resp, err := cli.Get(context.Background(), "\x00", clientv3.WithFromKey())
	if err != nil {
		t.Fatal(err)
	}
	return resp.Kvs, resp.Header.Revision
}

// restoreAndRead restores the snapshot file into a fresh member of
// another etcd cluster (the etcd binary of testenv, etcdutl's restore, as
// an operator restores a member) and reads its whole state.
func restoreAndRead(t *testing.T, path string) ([]*mvccpb.KeyValue, int64) {
	fresh := testenv.StartEtcdCluster(t, 1)
	m := fresh.Members[0]
	if err := m.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := m.RemoveData(); err != nil {
		t.Fatal(err)
	}
	err := snapshot.NewV3(zap.NewNop()).Restore(snapshot.RestoreConfig{
		SnapshotPath: path, Name: m.Name, OutputDataDir: m.DataDir, PeerURLs: []string{m.PeerURL},
		InitialCluster: fresh.InitialCluster(), InitialClusterToken: "testenv",
	})
	if err != nil {
		t.Fatalf("restore the compacted snapshot: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := m.Process.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: fresh.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	return state(t, cli)
}

// Snapshot compaction, proven against the real thing: 10,000 keys, a full
// snapshot and 5 delta snapshots of puts, overwrites and deletes; with the
// live etcd down, the compaction writes a full snapshot that, restored
// into a fresh member, holds exactly the final state (every key, its value,
// create and mod revisions and version) at the last revision. The
// snapshots it read stay. A delta with one flipped byte fails the next
// compaction with CorruptBackup, naming it, and nothing is uploaded.
func TestSnapshotCompactionHoldsTheFinalState(t *testing.T) {
	// Isolated: its own etcd, file bucket and restore member; the
	// compaction's embedded etcd leaves the global loggers alone.
	t.Parallel()
	w := newBackupWorld(t, 1)
	w.churn(t, 10000, 5, rand.New(rand.NewPCG(27, 1)))
	want, wantRev := state(t, w.cli)
	before := w.keys(t)
	if len(before) != 6 {
		t.Fatalf("snapshots: %v, want a full one and 5 deltas", before)
	}
	for _, m := range w.etcd.Members {
		if err := m.Process.Kill(); err != nil { // the compaction needs only the bucket
			t.Fatal(err)
		}
	}

	// One flipped byte in the third delta: the case of a letter in a
	// value, past its middle, so that the delta is still valid JSON and
	// base64, events in order: only its SHA-256 tells.
	third := filepath.Join(w.bucket, before[3])
	intact, err := os.ReadFile(third)
	if err != nil {
		t.Fatal(err)
	}
	flipped := slices.Clone(intact)
	at := len(flipped) / 2
	at += bytes.Index(flipped[at:], []byte(`"value":"`)) + len(`"value":"`)
	for !('a' <= flipped[at] && flipped[at] <= 'z' || 'A' <= flipped[at] && flipped[at] <= 'Z') {
		at++
	}
	flipped[at] ^= 0x20
	t.Logf("flipped byte %d of %s: %q → %q", at, before[3], intact[at], flipped[at])
	if err := os.WriteFile(third, flipped, 0o600); err != nil {
		t.Fatal(err)
	}
	err = w.op.compactSnapshots(t.Context(), task("snapshotCompaction", `{}`))
	var coded *opstask.CodedError
	if !errors.As(err, &coded) || coded.Code != codeCorruptBackup || !strings.Contains(err.Error(), before[3]) || !strings.Contains(err.Error(), "SHA-256") {
		t.Fatalf("compaction over a corrupted delta: %v; want CorruptBackup naming %s and its SHA-256", err, before[3])
	}
	t.Logf("corrupted delta: %v", err)
	if got := w.keys(t); !slices.Equal(got, before) {
		t.Errorf("snapshots after the failed compaction: %v, want %v (nothing uploaded)", got, before)
	}
	if err := os.WriteFile(third, intact, 0o600); err != nil {
		t.Fatal(err)
	}

	run := task("snapshotCompaction", `{}`)
	start := time.Now()
	if err := w.op.compactSnapshots(t.Context(), run); err != nil {
		t.Fatalf("compaction: %v", err)
	}
	t.Logf("compaction of %d keys and 5 deltas took %s", len(want), time.Since(start).Round(time.Millisecond))
	after := w.keys(t)
	added := slices.DeleteFunc(slices.Clone(after), func(k string) bool { return slices.Contains(before, k) })
	if len(added) != 1 || len(after) != 7 {
		t.Fatalf("snapshots after the compaction: %v; want the 6 before and one new full snapshot", after)
	}
	s, _ := parseSnapshotKey(added[0])
	if s.Kind != "Full" || s.EndRev != wantRev {
		t.Fatalf("compacted snapshot %s: want a full snapshot at revision %d", added[0], wantRev)
	}
	path := filepath.Join(t.TempDir(), "compacted.db")
	b, _ := w.open(t.Context())
	if err := download(t.Context(), b, added[0], path); err != nil {
		t.Fatal(err)
	}
	b.Close()

	got, gotRev := restoreAndRead(t, path)
	if gotRev != wantRev {
		t.Errorf("restored member at revision %d, want %d", gotRev, wantRev)
	}
	if len(got) != len(want) {
		t.Errorf("restored member holds %d keys, want %d", len(got), len(want))
	}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b *mvccpb.KeyValue) bool {
		return string(a.Key) == string(b.Key) && string(a.Value) == string(b.Value) &&
			a.CreateRevision == b.CreateRevision && a.ModRevision == b.ModRevision && a.Version == b.Version
	})); d != "" {
		t.Errorf("restored state differs (-live +restored):\n%.3000s", d)
	}

}

// BenchmarkSnapshotCompaction: 100,000 keys and 10 delta snapshots of
// churn, compacted into a full snapshot. Reports the peak heap of the
// process while the compaction runs (the temporary member's database is
// memory-mapped and not counted in it) and the snapshot sizes.
func BenchmarkSnapshotCompaction(b *testing.B) {
	w := newBackupWorld(b, 1)
	w.churn(b, 100000, 10, rand.New(rand.NewPCG(27, 2)))
	bucket, _ := w.open(context.Background())
	c, err := latestChain(context.Background(), bucket, "main")
	bucket.Close()
	if err != nil {
		b.Fatal(err)
	}
	var peak uint64
	for b.Loop() {
		runtime.GC()
		stop := sampleHeap(&peak)
		dir := b.TempDir()
		bucket, _ := w.open(context.Background())
		out, err := compactChain(context.Background(), bucket, c, dir)
		bucket.Close()
		stop()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(c.Bytes)/1e6, "chain-MB")
		b.ReportMetric(float64(out.Bytes)/1e6, "compacted-MB")
	}
	b.ReportMetric(float64(peak)/1e6, "peak-heap-MB")
}

// sampleHeap records the largest heap in use into peak every 5ms until
// stop is called.
func sampleHeap(peak *uint64) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			*peak = max(*peak, ms.HeapInuse)
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
