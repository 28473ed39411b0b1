package backupstore_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/proxytest"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// CopyBackups never writes over data in the target, on every store: a key
// whose object holds other content than its source (another size, or the
// same size and other bytes) is not written (ErrTargetDiffers, in a
// *CopyError that is ErrIncomplete naming the key, and in Overwrites,
// which a dry run reports as well); the target's identical object is
// skipped; the rest is copied. A rerun refuses the same key again.
func TestCopyNeverWritesOverTheTarget(t *testing.T) {
	ctx := context.Background()
	for _, store := range allStores {
		t.Run(store.name, func(t *testing.T) {
			s := store.open(t)
			src, dst := openStore(t, s), openStore(t, store.open(t))
			if s.Scheme == "mem" { // every mem:// OpenBucket is a bucket of its own
				dst = openURL(t, "mem://", nil)
			}
			put(t, src, []string{"a/1", "a/2", "a/3", "a/4"}, 10)
			if err := dst.WriteAll(ctx, "b/1", content("a/1", 10), nil); err != nil { // the same: skipped
				t.Fatal(err)
			}
			put(t, dst, []string{"b/2"}, 20) // another size
			put(t, dst, []string{"b/3"}, 10) // the same size, other bytes
			before := snapshot(t, dst, "")
			opts := backupstore.CopyOptions{SourcePrefix: "a/", TargetPrefix: "b/", ManifestKey: "m.json"}
			dry := opts
			dry.DryRun = true
			res, err := backupstore.CopyBackups(ctx, src, dst, &dry)
			if err != nil || !cmp.Equal(res.Overwrites, []string{"b/2", "b/3"}) {
				t.Fatalf("dry run: %v, overwrites %q; want b/2 and b/3 reported", err, res.Overwrites)
			}
			for range 2 { // and a rerun
				res, err = backupstore.CopyBackups(ctx, src, dst, &opts)
				var ce *backupstore.CopyError
				if !errors.Is(err, backupstore.ErrTargetDiffers) || !errors.Is(err, backupstore.ErrIncomplete) || !errors.As(err, &ce) ||
					len(ce.Failed) != 2 || ce.Failed[0].Key != "a/2" && ce.Failed[1].Key != "a/2" || !strings.Contains(err.Error(), `"b/2"`) || !strings.Contains(err.Error(), `"b/3"`) {
					t.Fatalf("CopyBackups: %v; want ErrTargetDiffers and ErrIncomplete naming b/2 and b/3", err)
				}
				if !cmp.Equal(res.Overwrites, []string{"b/2", "b/3"}) || res.Failed != 2 {
					t.Errorf("%+v, overwrites %q; want b/2 and b/3 failed", res.CopyProgress, res.Overwrites)
				}
				after := snapshot(t, dst, "")
				for _, k := range []string{"b/1", "b/2", "b/3"} {
					if after[k] != before[k] {
						t.Errorf("%s was %+v, is %+v: written over", k, before[k], after[k])
					}
				}
				if got, err := dst.ReadAll(ctx, "b/4"); err != nil || string(got) != string(content("a/4", 10)) {
					t.Errorf("b/4: %q, %v; want it copied", got, err)
				}
			}
			t.Log(err)
		})
	}
}

// On MinIO, an object written at a target key after CopyBackups listed the
// target, right before its write, is not written over (the write is
// conditional: If-None-Match): the copy compares it with the source and
// refuses the key (ErrTargetDiffers); a write whose answer was lost after
// the store stored it is retried, finds its own object, and counts as
// copied.
func TestCopyNeverWritesOverAnObjectWrittenMeanwhileOnMinIO(t *testing.T) {
	ctx := context.Background()
	s, srcStore := testenv.S3(t), testenv.S3(t)
	p := proxytest.Start(t, s.Endpoint)
	src, dst, direct := openStore(t, srcStore), viaProxy(t, s, p), openStore(t, s)
	put(t, src, []string{"a/1", "a/2"}, 100)
	isPut := func(key string) func(r *http.Request) bool {
		return func(r *http.Request) bool {
			return r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/"+s.Bucket+"/"+key)
		}
	}
	var intruded atomic.Bool
	intrude := isPut("b/1")
	p.SetHandler(func(_ http.ResponseWriter, r *http.Request) bool {
		if intrude(r) && !intruded.Swap(true) {
			if err := direct.WriteAll(ctx, "b/1", []byte("another writer's backup"), nil); err != nil {
				t.Error(err)
			}
		}
		return false // on to the store
	})
	var lost atomic.Bool
	putB2 := isPut("b/2")
	p.SetLoseAnswer(func(r *http.Request) bool { return putB2(r) && !lost.Swap(true) }, nil)
	res, err := backupstore.CopyBackups(ctx, src, dst, &backupstore.CopyOptions{SourcePrefix: "a/", TargetPrefix: "b/",
		Retry: backupstore.Retry{Attempts: 3}})
	var ce *backupstore.CopyError
	if !errors.Is(err, backupstore.ErrTargetDiffers) || !errors.As(err, &ce) || len(ce.Failed) != 1 || ce.Failed[0].Key != "a/1" || !intruded.Load() {
		t.Fatalf("CopyBackups: %v (intruded %t); want ErrTargetDiffers for a/1 alone", err, intruded.Load())
	}
	t.Log(err)
	if got, err := direct.ReadAll(ctx, "b/1"); err != nil || string(got) != "another writer's backup" {
		t.Errorf("b/1 holds %q, %v; want the other writer's object, not written over", got, err)
	}
	if got, err := direct.ReadAll(ctx, "b/2"); err != nil || string(got) != string(content("a/2", 100)) || res.Copied != 1 || p.Lost() == 0 {
		t.Errorf("b/2 (its answer lost %d times): %q, %v, %+v; want it copied once", p.Lost(), got, err, res.CopyProgress)
	}
}
