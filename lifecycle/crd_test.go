package lifecycle_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

var (
	crdGVR      = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	databaseGVR = schema.GroupVersionResource{Group: "groundskeeper.example.com", Version: "v1", Resource: "databases"}
	databaseGVK = schema.GroupVersionKind{Group: "groundskeeper.example.com", Version: "v1", Kind: "Database"}
)

// crdOwner: a real custom resource (kind Database) owns the pods and claims.
type crdOwner struct{ d dynamic.Interface }

func (crdOwner) kind() string { return "Database" }

func (k crdOwner) create(ctx context.Context, ns, name string) (lifecycle.Ref, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(databaseGVK)
	obj.SetName(name)
	created, err := k.d.Resource(databaseGVR).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{})
	if err != nil {
		return lifecycle.Ref{}, err
	}
	return lifecycle.RefTo(created, databaseGVK), nil
}

func (k crdOwner) delete(ctx context.Context, ns, name string, p metav1.DeletionPropagation) error {
	return k.d.Resource(databaseGVR).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &p})
}

func (k crdOwner) gone(ctx context.Context, ns, name string) (bool, error) {
	_, err := k.d.Resource(databaseGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	return apierrors.IsNotFound(err), client(err)
}

var crdOnce struct {
	sync.Once
	err error
}

// installDatabaseCRD installs the Database CRD once per test binary and waits
// until the garbage collector handles the new kind: it discovers new
// resources every 30 seconds, and before that it would not notice that an
// owner of the new kind was deleted.
func installDatabaseCRD(t *testing.T, cfg *rest.Config, ns string) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	crdOnce.Do(func() { crdOnce.err = installCRD(d, ns) })
	if crdOnce.err != nil {
		t.Fatal(crdOnce.err)
	}
	return d
}

func installCRD(d dynamic.Interface, ns string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "databases.groundskeeper.example.com"},
		"spec": map[string]any{
			"group": "groundskeeper.example.com",
			"scope": "Namespaced",
			"names": map[string]any{"plural": "databases", "singular": "database", "kind": "Database", "listKind": "DatabaseList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
	if _, err := d.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CRD: %w", err)
	}
	// Established, and the garbage collector deletes a dependent of a
	// deleted Database.
	probe := crdOwner{d}
	return wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		name := fmt.Sprintf("probe-%d", time.Now().UnixNano())
		owner, err := probe.create(ctx, ns, name)
		if err != nil {
			return false, nil // not served yet
		}
		dep := &unstructured.Unstructured{}
		dep.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"})
		dep.SetName(name)
		dep.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}})
		cms := d.Resource(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}).Namespace(ns)
		if _, err := cms.Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			return false, err
		}
		if err := probe.delete(ctx, ns, name, metav1.DeletePropagationBackground); err != nil {
			return false, err
		}
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) && ctx.Err() == nil {
			if _, err := cms.Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				return true, nil
			}
			time.Sleep(200 * time.Millisecond)
		}
		return false, nil
	})
}

// The owner is a real custom resource: owner deletion (cascading or not)
// under each policy, as the KEP's test plan says.
func TestCustomResourceOwner(t *testing.T) {
	env := testenv.StartKubernetes(t)
	d := installDatabaseCRD(t, env.Config, env.Namespace)
	for _, name := range policyNames {
		for _, sc := range []scenario{scenarios[0], scenarios[1], scenarios[4]} {
			t.Run(string(name)+"/"+sc.name, func(t *testing.T) {
				t.Parallel()
				p, err := name.Policy()
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				env := testenv.StartKubernetes(t)
				m, err := lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(env.Client.CoreV1())})
				if err != nil {
					t.Fatal(err)
				}
				w := newOperator(env.Client, m, crdOwner{d}, env.Namespace, "db")
				snaps, err := sc.run(ctx, w, p)
				if err != nil {
					t.Fatal(err)
				}
				if got, want := snaps[len(snaps)-1].String(), sc.want(p).String(); got != want {
					t.Errorf("ends with\n  %s\nwant\n  %s", got, want)
				}
				// The claims of pods in range referred to the Database itself.
				if first := snaps[0]; p.DeletesOnOwnerDeletion() && (len(first.Claims) != 2 || first.Claims[0].Refs != "Owner+ctl+block") {
					t.Errorf("after create: %s", first)
				}
			})
		}
	}
}
