// Package testbackup is a backup custom resource for the tests of backup
// collection (backupstore/collect, crt/backups): a Go type, its CRD, and
// the installation of the CRD on a test API server.
package testbackup

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// The resource's names.
var (
	GroupVersion = schema.GroupVersion{Group: "collect.groundskeeper.example.com", Version: "v1"}
	Resource     = GroupVersion.WithResource("backups")
)

// Backup is one backup: its data is every key under Spec.Prefix in
// Spec.Bucket (an s3:// URL), read with the credentials of Spec.Secret.
type Backup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              Spec   `json:"spec"`
	Status            Status `json:"status,omitempty"`
}

// Spec is where the data is and how it is judged.
type Spec struct {
	Bucket string `json:"bucket,omitempty"`
	Prefix string `json:"prefix,omitempty"`
	Secret string `json:"secret,omitempty"`
	// TTL is a retention duration ("7d"), for a collect.BackupPolicy.
	TTL string `json:"ttl,omitempty"`
	// Database is the group.
	Database string `json:"database,omitempty"`
	// Pool and Limit make a Backup stand for a bucket of a pool
	// (backupstore/share/pool.Pool): its pool and its most entries.
	Pool  string `json:"pool,omitempty"`
	Limit int    `json:"limit,omitempty"`
}

// Status holds the conditions and the outcome.
type Status struct {
	// Outcome: "Succeeded", "Failed" or empty (still running).
	Outcome string `json:"outcome,omitempty"`
	// Prefix is an entry's prefix once admitted to a shared bucket
	// (backupstore/share).
	Prefix string `json:"prefix,omitempty"`
	// Claims are the entries placed in a Backup that stands for a bucket.
	Claims []string `json:"claims,omitempty"`
	// DeleteAfter is when a deleted backup's data goes.
	DeleteAfter *metav1.Time       `json:"deleteAfter,omitempty"`
	Conditions  []metav1.Condition `json:"conditions,omitempty"`
}

// GetConditions returns the status conditions (collect.ConditionSetter).
func (b *Backup) GetConditions() []metav1.Condition { return b.Status.Conditions }

// SetConditions replaces the status conditions.
func (b *Backup) SetConditions(c []metav1.Condition) { b.Status.Conditions = c }

// BackupList is a list of Backups.
type BackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Backup `json:"items"`
}

// DeepCopyObject copies b through JSON, as its API server copy would be.
func (b *Backup) DeepCopyObject() runtime.Object { return deepCopy(b, new(Backup)) }

// DeepCopyObject copies l through JSON.
func (l *BackupList) DeepCopyObject() runtime.Object { return deepCopy(l, new(BackupList)) }

func deepCopy[T runtime.Object](in, out T) runtime.Object {
	data, err := json.Marshal(in)
	if err != nil {
		panic(err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		panic(err)
	}
	return out
}

// AddToScheme registers Backup and BackupList.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Backup{}, &BackupList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// FromUnstructured converts an object the dynamic client read.
func FromUnstructured(u *unstructured.Unstructured) (*Backup, error) {
	b := new(Backup)
	return b, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, b)
}

// ToUnstructured converts b for the dynamic client.
func ToUnstructured(b *Backup) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(GroupVersion.WithKind("Backup"))
	return u, nil
}

var installed sync.Map // rest.Config.Host -> error

// Install installs the CRD on the API server of cfg, once per server, and
// waits until it is served.
func Install(cfg *rest.Config) (dynamic.Interface, error) {
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if v, ok := installed.Load(cfg.Host); ok {
		if v != nil {
			return nil, v.(error)
		}
		return d, nil
	}
	err = install(d)
	if err != nil {
		installed.Store(cfg.Host, err)
	} else {
		installed.Store(cfg.Host, nil)
	}
	return d, err
}

func install(d dynamic.Interface) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": Resource.Resource + "." + Resource.Group},
		"spec": map[string]any{
			"group": Resource.Group,
			"scope": "Namespaced",
			"names": map[string]any{"plural": "backups", "singular": "backup", "kind": "Backup", "listKind": "BackupList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema":       map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	if _, err := d.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CRD: %w", err)
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := d.Resource(Resource).Namespace("default").List(ctx, metav1.ListOptions{})
		return err == nil, nil
	})
}
