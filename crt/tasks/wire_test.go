package tasks

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/groundskeeper-io/groundskeeper/opstask/kubestore"
)

// A finished task decoded from the list only as far as a FinishedTask has
// the kind, target, TTL and times kubestore.Decode gives the whole task,
// whatever the spec's shape; a task that is not finished and idle is
// decoded whole.
func TestWireTaskDecodesAsKubestore(t *testing.T) {
	const meta = `"apiVersion":"test.groundskeeper.io/v1","kind":"TestTask","metadata":{"name":"a","namespace":"ns","uid":"u1","resourceVersion":"5","creationTimestamp":"2026-11-28T19:00:00Z"`
	for name, item := range map[string]string{
		"one member, target, TTL":          `{` + meta + `},"spec":{"config":{"snapshot":{}},"etcdName":"etcd-1","ttlSecondsAfterFinished":3600},"status":{"state":"Succeeded","lastTransitionTime":"2026-11-28T19:00:01Z"}}`,
		"a null member and another, TTL 0": `{` + meta + `},"spec":{"config":{"snapshot":null,"defrag":{"x":1}},"etcdName":"e\"x","ttlSecondsAfterFinished":0},"status":{"state":"Failed","lastTransitionTime":"2026-11-28T19:00:01Z"}}`,
		"two members, no target":           `{` + meta + `},"spec":{"config":{"snapshot":{},"defrag":{"x":1}}},"status":{"state":"Rejected"}}`,
		"no member, no transition time":    `{` + meta + `},"spec":{"config":{}},"status":{"state":"Succeeded"}}`,
		"escaped target":                   `{` + meta + `},"spec":{"config":{"a":{}},"etcdName":"\u00fc\n"},"status":{"state":"Succeeded"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			var w wireTask
			if err := json.Unmarshal([]byte(item), &w); err != nil {
				t.Fatal(err)
			}
			f, ok := w.finished("etcdName")
			if !ok {
				t.Fatal("not decoded as a FinishedTask")
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON([]byte(item)); err != nil {
				t.Fatal(err)
			}
			task, err := kubestore.Decode(u, "etcdName")
			if err != nil {
				t.Fatal(err)
			}
			if f.Namespace != task.Namespace || f.Name != task.Name || f.UID != task.UID || f.ResourceVersion != task.ResourceVersion {
				t.Errorf("identity %s/%s %s %s, want %s/%s %s %s", f.Namespace, f.Name, f.UID, f.ResourceVersion, task.Namespace, task.Name, task.UID, task.ResourceVersion)
			}
			if f.Kind != task.Kind() || f.Target != task.Spec.Target || f.State != task.State() {
				t.Errorf("kind %q, target %q, state %s; want %q, %q, %s", f.Kind, f.Target, f.State, task.Kind(), task.Spec.Target, task.State())
			}
			if (f.TTLSecondsAfterFinished == nil) != (task.Spec.TTLSecondsAfterFinished == nil) ||
				(f.TTLSecondsAfterFinished != nil && *f.TTLSecondsAfterFinished != *task.Spec.TTLSecondsAfterFinished) {
				t.Errorf("TTL %v, want %v", f.TTLSecondsAfterFinished, task.Spec.TTLSecondsAfterFinished)
			}
			if lt := task.Status.LastTransitionTime; (lt == nil) != f.FinishedAt.IsZero() || (lt != nil && !f.FinishedAt.Equal(lt.Time)) {
				t.Errorf("finished at %v, want %v", f.FinishedAt, task.Status.LastTransitionTime)
			}
			if !f.CreationTimestamp.Equal(task.CreationTimestamp) {
				t.Errorf("created %v, want %v", f.CreationTimestamp, task.CreationTimestamp)
			}
		})
	}
	for name, item := range map[string]string{
		"pending":     `{` + meta + `},"spec":{"config":{"a":{}}},"status":{}}`,
		"held":        `{` + meta + `,"finalizers":["` + kubestore.Finalizer + `"]},"spec":{"config":{"a":{}}},"status":{"state":"Succeeded"}}`,
		"deleting":    `{` + meta + `,"deletionTimestamp":"2026-11-28T19:00:02Z"},"spec":{"config":{"a":{}}},"status":{"state":"Succeeded"}}`,
		"in cleanup":  `{` + meta + `},"spec":{"config":{"a":{}}},"status":{"state":"Succeeded","lastOperation":{"type":"Cleanup","state":"InProgress"}}}`,
		"TTL too big": `{` + meta + `},"spec":{"config":{"a":{}},"ttlSecondsAfterFinished":4294967296},"status":{"state":"Succeeded"}}`,
	} {
		t.Run(name, func(t *testing.T) {
			var w wireTask
			if err := json.Unmarshal([]byte(item), &w); err != nil {
				t.Fatal(err)
			}
			if f, ok := w.finished("etcdName"); ok {
				t.Errorf("decoded as %+v, want it decoded whole", f)
			}
		})
	}
}
