package kubestore_test

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic/fake"

	"github.com/groundskeeper-io/groundskeeper/opstask/kubestore"
	"github.com/groundskeeper-io/groundskeeper/opstask/opstasktest"
)

// FuzzFromUnstructured feeds arbitrary objects, as an API server or a person
// with kubectl might store them, to the conversion: it must return a task or
// an error, never panic, and a task it returns has valid JSON config members.
func FuzzFromUnstructured(f *testing.F) {
	f.Add(`{"apiVersion":"opstasktest.groundskeeper.io/v1","kind":"TestTask","metadata":{"name":"a","namespace":"ns","uid":"u","resourceVersion":"7","creationTimestamp":"2026-11-22T10:00:00Z"},"spec":{"config":{"onDemandSnapshot":{"type":"full"}},"target":"etcd-main","ttlSecondsAfterFinished":60},"status":{"state":"Failed","lastErrors":[{"code":"X","description":"d","observedAt":"2026-11-22T10:00:01Z"}],"lastOperation":{"type":"Execution","state":"Failed","lastUpdateTime":"2026-11-22T10:00:01Z","runID":"r","description":"d"}}}`)
	f.Add(`{"kind":"TestTask","spec":{"config":{"a":null,"b":[1]},"target":7,"ttlSecondsAfterFinished":1e12},"status":{"state":3}}`)
	f.Add(`{"spec":"x","status":{"startedAt":"yesterday"}}`)
	// The store is only used for its configuration here; no server is
	// contacted.
	s, err := kubestore.New(kubestore.Config{Client: fake.NewSimpleDynamicClient(runtime.NewScheme()), Resource: opstasktest.Resource,
		Kind: opstasktest.GroupVersionKind.Kind, TargetField: opstasktest.TargetField})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in string) {
		var obj map[string]any
		if json.Unmarshal([]byte(in), &obj) != nil || obj == nil {
			return
		}
		u := &unstructured.Unstructured{Object: obj}
		task, err := s.FromUnstructured(u)
		if err != nil {
			return
		}
		for name, raw := range task.Spec.Config {
			if !json.Valid(raw) {
				t.Fatalf("config member %s is not valid JSON: %q", name, raw)
			}
		}
		_ = task.Kind()
		_ = task.DeepCopy()
	})
}
