package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob/memblob"
	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/opstask"
)

func TestSnapshotKeys(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		key  string
		want snapshotKey
		ok   bool
	}{
		{snapshotName("Full", 0, 1200, at, false), snapshotKey{Kind: "Full", EndRev: 1200}, true},
		{snapshotName("Full", 0, 1200, at, true), snapshotKey{Kind: "Full", EndRev: 1200, Final: true}, true},
		{snapshotName("Delta", 1201, 1225, at, false), snapshotKey{Kind: "Delta", StartRev: 1201, EndRev: 1225}, true},
		{".copy-manifest.json", snapshotKey{}, false},
		{"Full-garbage", snapshotKey{}, false},
	} {
		got, ok := parseSnapshotKey(tc.key)
		tc.want.Key = tc.key
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("parseSnapshotKey(%q) = %+v, %v; want %+v, %v", tc.key, got, ok, tc.want, tc.ok)
		}
	}
}

// The snapshot check of snapshotCompaction tells an intact snapshot from a
// corrupted one.
func TestVerifyFull(t *testing.T) {
	ctx := context.Background()
	b := memblob.OpenBucket(nil)
	defer b.Close()
	data := bytes.Repeat([]byte("bbolt page "), 20000) // spans several reads
	sum := sha256.Sum256(data)
	good := append(append([]byte(nil), data...), sum[:]...)
	bad := append([]byte(nil), good...)
	bad[1000] ^= 1
	for key, content := range map[string][]byte{"good": good, "bad": bad, "short": []byte("tiny")} {
		if err := b.WriteAll(ctx, key, content, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := verifyFull(ctx, b, "good"); err != nil || n != int64(len(good)) {
		t.Errorf("intact snapshot: %d bytes, %v", n, err)
	}
	for _, key := range []string{"bad", "short"} {
		if _, err := verifyFull(ctx, b, key); err == nil || !strings.Contains(err.Error(), "corrupt") {
			t.Errorf("%s snapshot: %v, want a corruption error", key, err)
		}
	}
}

// countingEtcd is a one-member etcd that counts the destructive calls.
type countingEtcd struct{ compactions, defrags int }

func (e *countingEtcd) Health(context.Context) Health {
	return Health{Members: 1, Answering: []string{"m0"}, Leader: true}
}
func (e *countingEtcd) Revision(context.Context) (int64, error)            { return 42, nil }
func (e *countingEtcd) Snapshot(context.Context, io.Writer) (int64, error) { return 0, nil }
func (e *countingEtcd) Events(context.Context, int64, func(Event) error) (int64, error) {
	return 42, nil
}
func (e *countingEtcd) Compact(context.Context) (int64, error) { e.compactions++; return 42, nil }
func (e *countingEtcd) Defragment(_ context.Context, report func(Defragmented) error) error {
	e.defrags++
	return report(Defragmented{Member: "m0"})
}

func maintenanceRun() *opstask.Run {
	return &opstask.Run{Task: &opstask.Task{Namespace: "ns", Name: "m", Spec: opstask.Spec{
		Target: "main",
		Config: map[string]json.RawMessage{"onDemandMaintenance": json.RawMessage(`{"maintenanceType":{"etcdCompaction":true,"etcdDefragmentation":true}}`)},
	}}}
}

// With --dry-run, maintenance says what it would do and does nothing.
func TestMaintenanceDryRun(t *testing.T) {
	e := &countingEtcd{}
	o := &operator{targets: map[string]*Target{"main": {Etcd: e}}, clock: clock.RealClock{}, dryRun: true}
	err := o.maintain(context.Background(), maintenanceRun())
	var ce *opstask.CodedError
	if !errors.As(err, &ce) || ce.Code != codeDryRun ||
		!strings.Contains(err.Error(), "would compact main at revision 42") || !strings.Contains(err.Error(), "would defragment the members of main one by one: m0") {
		t.Errorf("dry run: %v, want a DryRun error saying what would be done", err)
	}
	if e.compactions != 0 || e.defrags != 0 {
		t.Errorf("dry run compacted %d and defragmented %d times", e.compactions, e.defrags)
	}

	o.dryRun = false
	if err := o.maintain(context.Background(), maintenanceRun()); err != nil || e.compactions != 1 || e.defrags != 1 {
		t.Errorf("real run: %v, %d compactions, %d defragmentations; want one of each", err, e.compactions, e.defrags)
	}
}

// Bad flags are refused with the flag and the value named, before any
// connection.
func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--etcd", "main"}, `invalid value "main" for flag -etcd: "main": want NAME=VALUE`},
		{[]string{"--etcd", "a=x", "--etcd", "a=y"}, `"a=y": a given twice`},
		{[]string{"stray"}, `unexpected arguments ["stray"]`},
	} {
		if err := run(context.Background(), tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("run(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
	for _, tc := range []struct {
		o    options
		want string
	}{
		{options{etcds: map[string]string{}, backupStores: map[string]string{"main": "s3://b"}}, "--backup-store main=s3://b: there is no --etcd main to back up"},
		{options{etcds: map[string]string{"main": "http://e:2379"}, backupStores: map[string]string{}, backupSecrets: map[string]string{"main": "s"}}, "--backup-secret main=s: there is no --backup-store for main"},
		{options{etcds: map[string]string{"main": "http://e:2379"}, backupStores: map[string]string{"main": "ftp://b"}}, `--backup-store main=ftp://b: backupstore: invalid configuration: backupstore: unsupported URL scheme "ftp"`},
	} {
		if op, err := newOperator(tc.o, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("newOperator(%+v) = %v, want an error containing %q", tc.o, err, tc.want)
			if op != nil {
				op.close()
			}
		}
	}
}

// A config the CRD would refuse, in a store without the CRD, is rejected by
// the precondition that decodes it, with code InvalidSpec.
func TestUndecodableConfigIsRejected(t *testing.T) {
	task := &opstask.Task{Namespace: "ns", Name: "m", Spec: opstask.Spec{Target: "main",
		Config: map[string]json.RawMessage{"onDemandMaintenance": json.RawMessage(`{"maintenanceType":"both"}`)}}}
	err := somethingToMaintain(context.Background(), task)
	var ce *opstask.CodedError
	if !errors.Is(err, opstask.ErrInvalidSpec) || !errors.As(err, &ce) || ce.Code != opstask.CodeInvalidSpec ||
		!strings.Contains(err.Error(), "spec.config.onDemandMaintenance") {
		t.Errorf("undecodable config: %v, want ErrInvalidSpec with code InvalidSpec naming the field", err)
	}
}
