package chaos

import (
	"context"
	"testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/s3store" // s3://
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// A bucket that the system under test deletes, on MinIO: with
// BucketMayGo, the listing that finds it missing is complete and empty
// (its keys are gone by then, and the moment is recorded); without, it
// failed (a store that is down says nothing of its keys).
func TestKeyHistoryBucketMayGo(t *testing.T) {
	ctx := context.Background()
	for _, mayGo := range []bool{false, true} {
		s := testenv.S3(t)
		b := s.Open(t)
		h := NewKeyHistory(b, "")
		h.BucketMayGo = mayGo
		if err := h.List(ctx); err != nil {
			t.Fatal(err)
		}
		if err := b.WriteAll(ctx, "p/k", []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
		if err := h.List(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := backupstore.DeleteBucket(ctx, s.URL, nil, nil); err != nil {
			t.Fatal(err)
		}
		err := h.List(ctx)
		ok, failed := h.Listings()
		r := h.Keys()["p/k"]
		switch {
		case !mayGo && (err == nil || failed != 1 || !r.GoneBy.IsZero() || len(h.Gone()) != 0):
			t.Errorf("without BucketMayGo, a listing of a deleted bucket: error %v, %d failed, key gone by %v, bucket gone %v; want an error, a failed listing, the key not gone", err, failed, r.GoneBy, h.Gone())
		case mayGo && (err != nil || ok != 3 || r.GoneBy.IsZero() || len(h.Gone()) != 1):
			t.Errorf("with BucketMayGo, a listing of a deleted bucket: error %v, %d complete, key gone by %v, bucket gone %v; want a complete listing, the key and the bucket gone", err, ok, r.GoneBy, h.Gone())
		}
	}
}
