package subreconcile_test

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

// Database is a small custom resource for the tests and examples, written the
// way controller-gen would generate it.
type Database struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DatabaseSpec   `json:"spec,omitempty"`
	Status DatabaseStatus `json:"status,omitempty"`
}

type DatabaseSpec struct {
	Replicas int               `json:"replicas,omitempty"`
	Version  string            `json:"version,omitempty"`
	Labels   map[string]string `json:"labels,omitempty"`
}

type DatabaseStatus struct {
	Replicas    int                      `json:"replicas,omitempty"`
	ConfigMap   bool                     `json:"configMap,omitempty"`
	Generations subreconcile.Generations `json:"generations,omitempty"`
}

func (in *Database) DeepCopyInto(out *Database) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.Labels = maps.Clone(in.Spec.Labels)
	in.Status.Generations.DeepCopyInto(&out.Status.Generations)
}

func (in *Database) DeepCopy() *Database {
	if in == nil {
		return nil
	}
	out := new(Database)
	in.DeepCopyInto(out)
	return out
}

func (in *Database) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func newDatabase(generation int64) *Database {
	return &Database{
		TypeMeta:   metav1.TypeMeta{APIVersion: "example.groundskeeper.io/v1", Kind: "Database"},
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop", Generation: generation},
		Spec:       DatabaseSpec{Replicas: 3, Version: "7.3"},
	}
}

func databaseGenerations(d *Database) *subreconcile.Generations { return &d.Status.Generations }
