package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/examples/backup-entry/api"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// A deleted entry whose backup is under S3 Object Lock (compliance mode, a
// few seconds) on a MinIO bucket created with Object Lock: everything else
// under its prefix is deleted at once, the entry is kept with its finalizer
// and PrefixDeleted=False, Retained naming the key and its retain-until
// time, and it is collected once the retention ends, without a retry loop
// in between.
func TestObjectLockedEntryOnMinIO(t *testing.T) {
	store := testenv.S3With(t, testenv.BucketOptions{ObjectLock: true})
	e := newEnv(t, store, 0)
	startManager(t, e.k.Config, e.k.Namespace, controllerOptions{})
	name := e.prefix + "--locked"
	e.createEntry(name, nil)
	be := e.waitEntry(name, "admitted", func(be *api.BackupEntry) bool {
		return hasReason(be, api.ConditionAdmitted, metav1.ConditionTrue, "Admitted")
	})
	e.write(be.Status.Prefix, "v2/Full-00000000-00001000", "v2/Incr-00001001-00001100")
	locked := be.Status.Prefix + "v2/Full-00000000-00001000"
	var client *s3.Client
	if !e.store.As(&client) {
		t.Fatal("not an S3 bucket")
	}
	until := time.Now().Add(20 * time.Second).UTC().Truncate(time.Second)
	if _, err := client.PutObjectRetention(context.Background(), &s3.PutObjectRetentionInput{
		Bucket: aws.String(store.Bucket), Key: aws.String(locked),
		Retention: &s3types.ObjectLockRetention{Mode: s3types.ObjectLockRetentionModeCompliance, RetainUntilDate: aws.Time(until)},
	}); err != nil {
		t.Fatal(err)
	}

	e.delete(api.EntryResource, name)
	kept := e.waitEntry(name, "retained", func(be *api.BackupEntry) bool {
		return hasReason(be, api.ConditionPrefixDeleted, metav1.ConditionFalse, "Retained")
	})
	msg := condition(kept, api.ConditionPrefixDeleted).Message
	t.Logf("condition: %s", msg)
	for _, want := range []string{locked, "retained until " + until.Format(time.RFC3339) + " by object lock"} {
		if !strings.Contains(msg, want) {
			t.Errorf("condition message %q does not name %q", msg, want)
		}
	}
	// The owner marker stays (written back) while data does: the retry
	// must still prove whose the prefix is.
	if got := e.keysUnder(be.Status.Prefix); !slices.Equal(got, []string{be.Status.Prefix + markerKey, locked}) {
		t.Errorf("while retained, the prefix holds %v; want only its marker and %s", got, locked)
	}
	e.waitEvent(name, corev1.EventTypeWarning, "Retained")
	if time.Until(until) < time.Second {
		t.Fatalf("the retention ended before the checks; make it longer")
	}

	e.waitEntry(name, "gone once the retention ends", gone)
	if time.Now().Before(until) {
		t.Errorf("entry collected at %v, before the retention ended at %v", time.Now(), until)
	}
	t.Logf("collected %v after the retention ended", time.Since(until))
	out, err := client.ListObjectVersions(context.Background(), &s3.ListObjectVersionsInput{Bucket: aws.String(store.Bucket), Prefix: aws.String(be.Status.Prefix)})
	if err != nil || len(out.Versions)+len(out.DeleteMarkers) != 0 {
		t.Errorf("versions left under %s: %v, %v", be.Status.Prefix, out, err)
	}
}
