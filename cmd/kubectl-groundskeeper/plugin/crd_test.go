package plugin_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/groundskeeper-io/groundskeeper/testenv"
)

const testGroup = "test.groundskeeper.io"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// customResource installs (once per control plane) a namespaced custom
// resource of any shape with a status subresource, as an operator's own
// backup or task resource, waits until the API server serves it, and
// returns its client in k's namespace.
func customResource(t *testing.T, k *testenv.Kubernetes, plural, kind string) dynamic.ResourceInterface {
	t.Helper()
	dc, err := dynamic.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	anyShape := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + "." + testGroup},
		"spec": map[string]any{
			"group": testGroup, "scope": "Namespaced",
			"names": map[string]any{"plural": plural, "kind": kind, "singular": strings.ToLower(kind)},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"subresources": map[string]any{"status": map[string]any{}},
				"schema":       map[string]any{"openAPIV3Schema": anyShape},
			}},
		},
	}}
	if _, err := dc.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: testGroup, Version: "v1", Resource: plural}
	// Served once a list of it answers.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := dc.Resource(gvr).Namespace(k.Namespace).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		t.Fatalf("%s not served: %v", gvr, err)
	}
	return dc.Resource(gvr).Namespace(k.Namespace)
}

// createWithStatus creates obj, then writes its status through the status
// subresource, as a controller does.
func createWithStatus(t *testing.T, c dynamic.ResourceInterface, obj map[string]any) *unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	u := &unstructured.Unstructured{Object: obj}
	status, hasStatus := obj["status"]
	created, err := c.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasStatus {
		return created
	}
	created.Object["status"] = status
	updated, err := c.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return updated
}
