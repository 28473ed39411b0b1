package plugin_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/cmd/kubectl-groundskeeper/plugin"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func condition(typ, status, reason, message string, at time.Time) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": message,
		"lastTransitionTime": at.Format(time.RFC3339)}
}

func TestExplain(t *testing.T) {
	k := testenv.StartKubernetes(t)
	ctx := context.Background()
	backups := customResource(t, k, "gkbackups", "GKBackup")
	cache := "--cache-dir=" + t.TempDir()
	opts := plugin.Options{Clock: clocktesting.NewFakeClock(t0.Add(time.Hour))}

	b := createWithStatus(t, backups, map[string]any{
		"apiVersion": testGroup + "/v1", "kind": "GKBackup",
		"metadata": map[string]any{"name": "nightly-0412"},
		"spec":     map[string]any{"location": "s3://backups/db/nightly-0412/", "secretName": "s3-creds"},
		"status": map[string]any{"conditions": []any{
			condition(collect.ConditionDataDeleted, "False", collect.ReasonSecretNotFound, "Secret "+k.Namespace+"/s3-creds not found", t0),
		}},
	})
	createWithStatus(t, backups, map[string]any{
		"apiVersion": testGroup + "/v1", "kind": "GKBackup",
		"metadata": map[string]any{"name": "weekly-07"},
		"status": map[string]any{"conditions": []any{
			condition("Collected", "False", collect.ReasonNestedPrefix, "prefix s3://backups/db/ holds the prefix of backup nightly-0412 (s3://backups/db/nightly-0412/)", t0),
		}},
	})
	createWithStatus(t, backups, map[string]any{
		"apiVersion": testGroup + "/v1", "kind": "GKBackup",
		"metadata": map[string]any{"name": "plain"},
	})
	// The Warning event the collector records beside the condition.
	if _, err := k.Client.CoreV1().Events(k.Namespace).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "nightly-0412.1"},
		InvolvedObject: corev1.ObjectReference{APIVersion: testGroup + "/v1", Kind: "GKBackup", Namespace: k.Namespace, Name: "nightly-0412", UID: b.GetUID()},
		Type:           corev1.EventTypeWarning, Reason: collect.ReasonSecretNotFound,
		Message:       "Secret " + k.Namespace + "/s3-creds not found; nothing deleted",
		LastTimestamp: metav1.NewTime(t0), FirstTimestamp: metav1.NewTime(t0),
		Source: corev1.EventSource{Component: "backup-collector"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// An unmounted claim with its TTL, as lifecycle tracks it.
	ann := lifecycle.Annotations{}
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data-db-2", Annotations: map[string]string{
			ann.PodNameKey(): "db-2", ann.TTLKey(): "2d", ann.LastUnmountedKey(): t0.Format(time.RFC3339)}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}
	if _, err := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	r := run(t, opts, kube(k, "explain", "gkbackups.test.groundskeeper.io/nightly-0412", cache)...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	golden(t, "explain-secret.txt", r.out, k)
	r = run(t, opts, kube(k, "explain", "gkbackup/nightly-0412", "-o", "json", cache)...)
	golden(t, "explain-secret.json", r.out, k)
	r = run(t, opts, kube(k, "explain", "gkbackup/weekly-07", cache)...)
	golden(t, "explain-nested.txt", r.out, k)
	r = run(t, opts, kube(k, "explain", "pvc/data-db-2", cache)...)
	golden(t, "explain-claim.txt", r.out, k)

	expired := opts
	expired.Clock = clocktesting.NewFakeClock(t0.Add(72 * time.Hour))
	r = run(t, expired, kube(k, "explain", "pvc/data-db-2", cache)...)
	if !strings.Contains(r.out, "ended at 2026-01-17T09:00:00Z: the collector deletes it at its next pass") {
		t.Errorf("an expired claim is not said deletable now:\n%s", r.out)
	}

	t.Run("bad input", func(t *testing.T) {
		oneLineError(t, run(t, opts, kube(k, "explain", "nosuchkind/x", cache)...), plugin.ExitError, "nosuchkind")
		oneLineError(t, run(t, opts, kube(k, "explain", "gkbackup/missing", cache)...), plugin.ExitError, "missing", "not found")
		oneLineError(t, run(t, opts, kube(k, "explain", "gkbackup/plain", cache)...), plugin.ExitError, "gkbackup/plain", "no condition, event or annotation of groundskeeper")
		oneLineError(t, run(t, opts, kube(k, "explain", "gkbackup", cache)...), plugin.ExitUsage, "KIND/NAME")
	})
}
