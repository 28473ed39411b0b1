package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// Every object of deploy/ is accepted by a real API server with the CRDs
// installed (server-side dry run: nothing is created but the namespace),
// so the RBAC rules, the Deployment and the example bucket and entry are
// valid against the schemas.
func TestDeployManifestsValidate(t *testing.T) {
	k := testenv.StartKubernetes(t)
	client := installCRDs(t, k.Config)
	dc, err := discovery.NewDiscoveryClientForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	ctx := context.Background()
	n := 0
	for _, file := range []string{"rbac.yaml", "deployment.yaml", "example.yaml"} {
		f, err := os.Open(filepath.Join("deploy", file))
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewYAMLOrJSONDecoder(f, 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			gvk := u.GroupVersionKind()
			if gvk.Kind == "Namespace" {
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: u.GetName()}}
				if _, err := k.Client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					_ = k.Client.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
				})
				n++
				continue
			}
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				t.Fatalf("%s: %s %s: %v", file, gvk, u.GetName(), err)
			}
			r := client.Resource(m.Resource).Namespace(u.GetNamespace())
			if _, err := r.Create(ctx, &u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
				t.Errorf("%s: %s %s: %v", file, gvk.Kind, u.GetName(), err)
			}
			n++
		}
		f.Close()
	}
	if n < 12 {
		t.Errorf("validated %d objects; deploy/ has more", n)
	}
}
