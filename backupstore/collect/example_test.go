package collect_test

import (
	"context"
	"fmt"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/blob/memblob"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	// The providers of the stores a bucket URL may name.
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/azurestore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/gcsstore"
	"github.com/groundskeeper-io/groundskeeper/internal/testbackup"
	"github.com/groundskeeper-io/groundskeeper/retention"
)

// memObjects keeps backups in a map and checks the delete preconditions as
// the API server does. A controller-runtime user takes crt/backups.Objects;
// a client-go user writes these five methods over a typed client.
type memObjects map[string]*testbackup.Backup

func (m memObjects) List(context.Context, string) ([]*testbackup.Backup, error) {
	var out []*testbackup.Backup
	for _, b := range m {
		out = append(out, b)
	}
	return out, nil
}

func (m memObjects) Get(_ context.Context, _, name string) (*testbackup.Backup, error) {
	return m[name], nil
}
func (m memObjects) UpdateStatus(_ context.Context, b *testbackup.Backup) error {
	m[b.Name] = b
	return nil
}
func (m memObjects) Update(_ context.Context, b *testbackup.Backup) error { m[b.Name] = b; return nil }
func (m memObjects) Delete(_ context.Context, _, name string, uid types.UID, rv string) error {
	if b := m[name]; b == nil || b.UID != uid || b.ResourceVersion != rv {
		return fmt.Errorf("precondition failed")
	}
	delete(m, name)
	return nil
}

// The backups of one database, kept by a restic-style policy string: the
// last two successful ones. The failed one and the oldest good one go, data
// first; a dry run says exactly which keys it would delete.
func Example() {
	ctx := context.Background()
	bucket := memblob.OpenBucket(nil)
	defer bucket.Close()
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	objs := memObjects{}
	for i, outcome := range []string{"Succeeded", "Succeeded", "Failed", "Succeeded"} {
		name := fmt.Sprintf("orders-%d", i)
		objs[name] = &testbackup.Backup{
			ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name, UID: types.UID(name), ResourceVersion: "1",
				CreationTimestamp: metav1.NewTime(day.Add(time.Duration(i) * 24 * time.Hour))},
			Spec:   testbackup.Spec{Prefix: "orders/" + name + "/", Database: "orders"},
			Status: testbackup.Status{Outcome: outcome},
		}
		_ = bucket.WriteAll(ctx, "orders/"+name+"/data", []byte("..."), nil)
	}
	policy, _ := retention.ParsePolicy("last=2")

	cfg := collect.Config[*testbackup.Backup]{
		Objects: objs,
		Secrets: backupstore.SecretsFrom(nil), // not read: no Secret named
		Location: func(_ context.Context, b *testbackup.Backup) (collect.Location, error) {
			return collect.Location{URL: "mem://", Prefix: b.Spec.Prefix}, nil
		},
		Policy: func(database string) (retention.Policy, error) { return policy, nil },
		Group:  func(b *testbackup.Backup) string { return b.Spec.Database },
		Outcome: func(b *testbackup.Backup) retention.Outcome {
			return map[string]retention.Outcome{"Succeeded": retention.OutcomeSucceeded, "Failed": retention.OutcomeFailed}[b.Status.Outcome]
		},
		Open: func(context.Context, string, *backupstore.Credentials) (*blob.Bucket, func() error, error) {
			return bucket, func() error { return nil }, nil
		},
		Clock:  clocktesting.NewFakeClock(day.Add(5 * 24 * time.Hour)),
		DryRun: true,
	}
	dry, _ := collect.New(cfg)
	rep, _ := dry.Pass(ctx, "db")
	for _, o := range rep.Backups {
		fmt.Println("would collect", o.Name, o.Keys)
	}
	cfg.DryRun = false
	c, _ := collect.New(cfg)
	rep, _ = c.Pass(ctx, "db")
	for _, o := range rep.Backups {
		fmt.Println(o.Name+":", o.Message)
	}
	for _, k := range rep.Kept {
		fmt.Println("kept", k.Name, "("+k.Why+")")
	}
	// Output:
	// would collect orders-0 [orders/orders-0/data]
	// would collect orders-2 [orders/orders-2/data]
	// orders-0: deleted 1 objects (3 bytes) under mem://orders/orders-0/ (its retention policy lets it go), then the resource
	// orders-2: deleted 1 objects (3 bytes) under mem://orders/orders-2/ (its retention policy lets it go), then the resource
	// kept orders-1 (newest)
	// kept orders-3 (newest+guard)
}
