package api_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/examples/etcd-opstask/api"
	"github.com/groundskeeper-io/groundskeeper/opstask"
)

func TestSnapshotTimeoutAndKey(t *testing.T) {
	for _, tc := range []struct {
		name, config string
		timeout      time.Duration
		key          string
	}{
		{"full snapshot, default timeout", `{"type":"full"}`, 480 * time.Second, "full"},
		{"delta snapshot, default timeout", `{"type":"delta"}`, 60 * time.Second, "delta"},
		{"full snapshot, own timeout", `{"type":"full","timeoutSecondsFull":900,"timeoutSecondsDelta":5}`, 900 * time.Second, "full"},
		{"delta snapshot, own timeout", `{"type":"delta","timeoutSecondsFull":900,"timeoutSecondsDelta":5}`, 5 * time.Second, "delta"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := &opstask.Task{Name: "t", Spec: opstask.Spec{Config: map[string]json.RawMessage{"onDemandSnapshot": json.RawMessage(tc.config)}}}
			d, err := api.SnapshotTimeout(task)
			if err != nil || d != tc.timeout {
				t.Errorf("timeout %s, %v; want %s", d, err, tc.timeout)
			}
			k, err := api.SnapshotDuplicateKey(task)
			if err != nil || k != tc.key {
				t.Errorf("key %q, %v; want %q", k, err, tc.key)
			}
		})
	}
	other := &opstask.Task{Name: "t", Spec: opstask.Spec{Config: map[string]json.RawMessage{"snapshotCompaction": json.RawMessage(`{}`)}}}
	if _, err := api.SnapshotTimeout(other); !errors.Is(err, opstask.ErrInvalidSpec) {
		t.Errorf("timeout of a compaction task: %v, want ErrInvalidSpec", err)
	}
}
