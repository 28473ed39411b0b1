package kubestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/opstasktest"
)

func TestConformance(t *testing.T) {
	opstasktest.Run(t, func(t *testing.T) opstasktest.Harness {
		k := startKube(t)
		s := k.store(t, nil)
		return opstasktest.Harness{
			Store: s,
			Create: func(ctx context.Context, task *opstask.Task) (*opstask.Task, error) {
				return k.create(ctx, s, task)
			},
			Approve: k.approve,
			Members: [2]opstasktest.Member{
				{Name: "onDemandSnapshot", Config: json.RawMessage(`{"type":"full"}`)},
				{Name: "snapshotCompaction", Config: json.RawMessage(`{}`)},
			},
		}
	})
}

func TestValidationRefusesBadSpecs(t *testing.T) {
	k := startKube(t)
	ctx := t.Context()
	client := k.dyn.Resource(opstasktest.Resource).Namespace(k.Namespace)
	snapshot := map[string]any{"type": "full"}
	compaction := map[string]any{}
	tests := []struct {
		name   string
		config map[string]any
		want   string
	}{
		{"no config member", map[string]any{}, "should have at least 1 properties"},
		{"two config members", map[string]any{"onDemandSnapshot": snapshot, "snapshotCompaction": compaction}, "must have at most 1 item"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u := k.object(task("bad-"+string(rune('a'+i)), "x", map[string]any{}, "etcd-main"))
			u.Object["spec"].(map[string]any)["config"] = tc.config
			_, err := client.Create(ctx, u, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("create: got %v, want Invalid with %q", err, tc.want)
			}
			t.Logf("API server said: %v", err)
		})
	}
	t.Run("config changed after creation", func(t *testing.T) {
		created, err := client.Create(ctx, k.object(task("change-me", "onDemandSnapshot", snapshot, "etcd-main")), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, change := range []struct {
			name  string
			apply func(u *unstructured.Unstructured)
			want  string
		}{
			{"snapshot type", func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "delta", "spec", "config", "onDemandSnapshot", "type")
			}, "config is immutable"},
			{"other member", func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedMap(u.Object, map[string]any{"snapshotCompaction": map[string]any{}}, "spec", "config")
			}, "config is immutable"},
			{"target", func(u *unstructured.Unstructured) {
				_ = unstructured.SetNestedField(u.Object, "etcd-events", "spec", opstasktest.TargetField)
			}, "target is immutable"},
			{"target removed", func(u *unstructured.Unstructured) {
				unstructured.RemoveNestedField(u.Object, "spec", opstasktest.TargetField)
			}, "target cannot be added or removed after creation"},
		} {
			u := created.DeepCopy()
			change.apply(u)
			_, err := client.Update(ctx, u, metav1.UpdateOptions{})
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), change.want) {
				t.Errorf("change %s: got %v, want Invalid with %q", change.name, err, change.want)
			} else {
				t.Logf("change %s: API server said: %v", change.name, err)
			}
		}
	})
	t.Run("lastErrors beyond the bound", func(t *testing.T) {
		created, err := client.Create(ctx, k.object(task("many-errors", "onDemandSnapshot", snapshot, "etcd-main")), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s := k.store(t, nil)
		tk, err := s.FromUnstructured(created)
		if err != nil {
			t.Fatal(err)
		}
		for range opstask.MaxLastErrors + 1 {
			tk.Status.LastErrors = append(tk.Status.LastErrors, opstask.LastError{Code: "E", Description: "x", ObservedAt: metav1.Now()})
		}
		err = s.UpdateStatus(ctx, tk)
		if err == nil || errors.Is(err, opstask.ErrConflict) || !strings.Contains(err.Error(), "must have at most 10 items") {
			t.Fatalf("status with %d lastErrors: got %v, want refused with at most 10 items", opstask.MaxLastErrors+1, err)
		}
	})
}
