package collect_test

import (
	"context"
	"testing"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/internal/testbackup"
	"github.com/groundskeeper-io/groundskeeper/retention"
)

// changing is testbackup.Mem whose backups another writer changes just
// before each deletion, as a user editing the resource would.
type changing struct{ *testbackup.Mem }

func (c changing) Delete(ctx context.Context, ns, name string, uid types.UID, rv string) error {
	b, err := c.Get(ctx, ns, name)
	if err != nil {
		return err
	}
	b.Labels = map[string]string{"edited": "meanwhile"}
	if err := c.Update(ctx, b); err != nil {
		return err
	}
	return c.Mem.Delete(ctx, ns, name, uid, rv)
}

// A backup without a finalizer whose data was deleted, and which changed
// before the resource could be deleted with its preconditions, is kept:
// and it says that its data is gone, so that nobody restores from it.
func TestDataGoneIsRecordedWhenTheResourceChangedMeanwhile(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	objs := changing{&testbackup.Mem{}}
	bucket := memblob.OpenBucket(nil)
	b, err := objs.Create(ctx, &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", CreationTimestamp: metav1.NewTime(now)},
		Spec: testbackup.Spec{Prefix: "b/", TTL: "1h"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := bucket.WriteAll(ctx, "b/data", []byte("x"), nil); err != nil {
		t.Fatal(err)
	}
	c, err := collect.New(collect.Config[*testbackup.Backup]{
		Objects: objs, Secrets: backupstore.SecretsFrom(nil), Clock: clocktesting.NewFakeClock(now.Add(2 * time.Hour)),
		Open: func(context.Context, string, *backupstore.Credentials) (*blob.Bucket, func() error, error) {
			return bucket, func() error { return nil }, nil
		},
		Location: func(_ context.Context, b *testbackup.Backup) (collect.Location, error) {
			return collect.Location{URL: "mem://b", Prefix: b.Spec.Prefix}, nil
		},
		Keep: collect.BackupPolicy[*testbackup.Backup](func(b *testbackup.Backup) (retention.Policy, error) {
			d, err := retention.ParseDuration(b.Spec.TTL)
			return retention.TTL{After: d}, err
		}),
		Time: func(b *testbackup.Backup) time.Time { return b.CreationTimestamp.Time },
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := c.Pass(ctx, "ns")
	if err != nil {
		t.Fatal(err)
	}
	if ok, _ := bucket.Exists(ctx, "b/data"); ok {
		t.Fatalf("the expired backup's data is still there: %+v", rep)
	}
	kept, err := objs.Get(ctx, "ns", "b")
	if err != nil || kept.UID != b.UID {
		t.Fatalf("backup b: %+v, %v; want it kept (it changed meanwhile)", kept, err)
	}
	cond := meta.FindStatusCondition(kept.Status.Conditions, collect.ConditionDataDeleted)
	if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != collect.ReasonCollected {
		t.Errorf("condition %+v; want DataDeleted=True, %s: the data is gone", cond, collect.ReasonCollected)
	}
}
