package main

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/groundskeeper-io/groundskeeper/examples/fdb-lock/api"
	"github.com/groundskeeper-io/groundskeeper/locking"
)

// The custom resource this example reconciles is api.Database; these names
// keep the controller's code short.
type (
	Database       = api.Database
	DatabaseSpec   = api.DatabaseSpec
	DatabaseStatus = api.DatabaseStatus
	LockOptions    = api.LockOptions
	DenyListEntry  = locking.DenyListEntry
)

var databaseGVR = api.Resource

func denyList(d *Database) []locking.DenyListEntry { return d.Spec.LockOptions.DenyList }

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
