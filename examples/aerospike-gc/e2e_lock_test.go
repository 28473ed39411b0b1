package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/examples/aerospike-gc/api"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/retention"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// An expired backup one of whose objects is under S3 Object Lock
// (compliance mode, a few seconds) on a MinIO bucket created with Object
// Lock: the pass deletes the rest of its data, keeps the resource with
// DataDeleted=False, Retained naming the key and its retain-until time, and
// comes back at that time, not after retryAfter; the pass after the
// retention ends collects it.
func TestObjectLockedBackupIsCollectedWhenTheRetentionEnds(t *testing.T) {
	k := testenv.StartKubernetes(t)
	cl := installCRD(t, k.Config)
	store := testenv.S3With(t, testenv.BucketOptions{ObjectLock: true})
	bucket := store.Open(t)
	ctx := logr.NewContext(context.Background(), testr.New(t))
	ns := k.Namespace
	createSecret(t, k, "minio", testenv.S3SecretAccessKey, store)
	createBackup(t, cl, ns, "locked", "7d", "minio", store.Bucket)
	prefix := "backups/" + ns + "/locked/"
	for _, part := range []string{"part-0001.asb", "metadata.json"} {
		if err := bucket.WriteAll(ctx, prefix+part, []byte("data"), nil); err != nil {
			t.Fatal(err)
		}
	}
	var s3c *s3.Client
	if !bucket.As(&s3c) {
		t.Fatal("not an S3 bucket")
	}
	until := time.Now().Add(5 * time.Second).UTC().Truncate(time.Second)
	if _, err := s3c.PutObjectRetention(ctx, &s3.PutObjectRetentionInput{
		Bucket: aws.String(store.Bucket), Key: aws.String(prefix + "part-0001.asb"),
		Retention: &s3types.ObjectLockRetention{Mode: s3types.ObjectLockRetentionModeCompliance, RetainUntilDate: aws.Time(until)},
	}); err != nil {
		t.Fatal(err)
	}
	manager, err := lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(k.Client.CoreV1())})
	if err != nil {
		t.Fatal(err)
	}
	// The TTL counts days: the fake clock stands eight days after the
	// retention's start, which MinIO measures in real time.
	clk := clocktesting.NewFakeClock(time.Now().Add(8 * retention.Day))
	c := &collector{
		namespace: ns, backups: newRacingBackups(cl, func() {}), // lists from the API server
		secrets: backupstore.SecretsFrom(k.Client.CoreV1()), claims: lifecycle.ClientGo(k.Client.CoreV1()), open: openBucket,
		lifecycle: manager, claimScope: lifecycle.Scope{Namespace: ns},
		recorder: lifecycle.EventFunc(func(runtime.Object, string, string, string) {}),
		clock:    clk, retryAfter: time.Hour, notBefore: map[types.UID]time.Time{},
	}
	rep, err := c.pass(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Backups) != 1 || rep.Backups[0].Reason != api.ReasonRetained || rep.Backups[0].Deleted {
		t.Fatalf("first pass: %+v; want the backup kept as Retained", rep.Backups)
	}
	var b api.AerospikeNamespaceBackup
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "locked"}, &b); err != nil {
		t.Fatalf("the backup resource is gone while its data is retained: %v", err)
	}
	cond := meta.FindStatusCondition(b.Status.Conditions, api.ConditionDataDeleted)
	if cond == nil || cond.Reason != api.ReasonRetained {
		t.Fatalf("condition %+v; want DataDeleted=False, Retained", cond)
	}
	for _, want := range []string{prefix + "part-0001.asb", "retained until " + until.Format(time.RFC3339) + " by object lock"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("condition message %q does not name %q", cond.Message, want)
		}
	}
	if got := c.notBefore[b.UID]; !got.Equal(until) {
		t.Errorf("next attempt at %v; want %v, when the retention ends (not retryAfter later)", got, until)
	}
	if ok, _ := bucket.Exists(ctx, prefix+"metadata.json"); ok {
		t.Error("the unlocked object was kept")
	}

	time.Sleep(time.Until(until) + time.Second)
	rep, err = c.pass(ctx)
	if err != nil || len(rep.Backups) != 1 || !rep.Backups[0].Deleted {
		t.Fatalf("pass after the retention: %+v, %v; want the backup collected", rep.Backups, err)
	}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: "locked"}, &b); !apierrors.IsNotFound(err) {
		t.Errorf("backup resource after collection: %v; want NotFound", err)
	}
}
