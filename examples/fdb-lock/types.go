package main

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/groundskeeper-io/groundskeeper/locking"
)

// The custom resource this example reconciles: a Database, a stand-in for
// the FoundationDB operator's FoundationDBCluster that keeps only what the
// global steps and the lock need. deploy/crd.yaml is its schema.
var databaseGVR = schema.GroupVersionResource{Group: "examples.groundskeeper.io", Version: "v1alpha1", Resource: "databases"}

// Database is one database that several operator instances (one per data
// centre) reconcile together. There is no FoundationDB here: the "live"
// state of the database is the resource's status, which the global steps
// change.
type Database struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              DatabaseSpec   `json:"spec,omitempty"`
	Status            DatabaseStatus `json:"status,omitempty"`
}

type DatabaseSpec struct {
	// Version every instance's processes should run.
	Version string `json:"version,omitempty"`
	// Coordinators is how many coordinators the database should have.
	Coordinators int `json:"coordinators,omitempty"`
	// ExcludedProcesses are process IDs to exclude from the database.
	ExcludedProcesses []string    `json:"excludedProcesses,omitempty"`
	LockOptions       LockOptions `json:"lockOptions,omitempty"`
}

// LockOptions mirrors the FoundationDB operator's spec.lockOptions.
type LockOptions struct {
	// DisableLocks lets the global steps run without the lock, for when the
	// database is unavailable.
	DisableLocks bool `json:"disableLocks,omitempty"`
	// DenyList adds (or, with allow, removes) instances to the deny list.
	DenyList []DenyListEntry `json:"denyList,omitempty"`
}

// DenyListEntry is the locking package's entry, embedded as it is.
type DenyListEntry = locking.DenyListEntry

type DatabaseStatus struct {
	Coordinators      int      `json:"coordinators,omitempty"`
	ExcludedProcesses []string `json:"excludedProcesses,omitempty"`
	// RunningVersions is the version each instance's processes run, by lock ID.
	RunningVersions map[string]string `json:"runningVersions,omitempty"`
}

func (d *Database) DeepCopy() *Database {
	out := *d
	d.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	out.Spec.ExcludedProcesses = append([]string(nil), d.Spec.ExcludedProcesses...)
	out.Spec.LockOptions.DenyList = append([]DenyListEntry(nil), d.Spec.LockOptions.DenyList...)
	out.Status.ExcludedProcesses = append([]string(nil), d.Status.ExcludedProcesses...)
	if d.Status.RunningVersions != nil {
		out.Status.RunningVersions = make(map[string]string, len(d.Status.RunningVersions))
		for k, v := range d.Status.RunningVersions {
			out.Status.RunningVersions[k] = v
		}
	}
	return &out
}

func (d *Database) DeepCopyObject() runtime.Object { return d.DeepCopy() }

func (d *Database) denyList() []locking.DenyListEntry { return d.Spec.LockOptions.DenyList }

func fromUnstructured(u *unstructured.Unstructured) (*Database, error) {
	var d Database
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
		return nil, fmt.Errorf("decode %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return &d, nil
}

func toUnstructured(d *Database) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
	if err != nil {
		return nil, fmt.Errorf("encode database %s/%s: %w", d.Namespace, d.Name, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(databaseGVR.GroupVersion().String())
	u.SetKind("Database")
	return u, nil
}
