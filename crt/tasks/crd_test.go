package tasks_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/groundskeeper-io/groundskeeper/crt/tasks"
	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/opstasktest"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// CRD accepts the generated CRD of opstasktest's TestTask and refuses
// each way a CRD can differ from its type or lack a rule opstask needs,
// naming the field (and the marker to add).
func TestCRDRefusesDriftAndMissingRules(t *testing.T) {
	scheme := taskScheme(t)
	opts := &tasks.Options{TargetField: opstasktest.TargetField}
	if _, err := tasks.CRD(opstasktest.CRD, &opstasktest.TestTask{}, scheme, opts); err != nil {
		t.Fatalf("generated CRD: %v", err)
	}
	edit := func(old, new string) []byte {
		if !bytes.Contains(opstasktest.CRD, []byte(old)) {
			t.Fatalf("the generated CRD has no %q", old)
		}
		return bytes.Replace(opstasktest.CRD, []byte(old), []byte(new), 1)
	}
	tests := []struct {
		name string
		crd  []byte
		opts *tasks.Options
		want string
	}{
		{"a field renamed since generation", edit("ttlSecondsAfterFinished:", "ttlAfterFinished:"), opts,
			"spec: field ttlSecondsAfterFinished of opstasktest.TestTaskSpec is not in the schema"},
		{"a field of the wrong type", edit("                minLength: 1\n                type: string", "                minLength: 1\n                type: integer"), opts,
			`spec.target: type "integer", want "string"`},
		{"no one-of on config", edit("                maxProperties: 1\n", ""), opts,
			"spec.config: nothing requires exactly one member"},
		{"config may change", edit("                - message: config is immutable\n                  rule: self == oldSelf\n", ""), opts,
			"spec.config may change after creation"},
		{"target may change", edit("                - message: target is immutable\n                  rule: self == oldSelf\n", ""), opts,
			"spec.target may change after creation"},
		{"target may be removed", edit("rule: has(self.target) == has(oldSelf.target)", "rule: 'true'"), opts,
			"spec.target may be added or removed after creation"},
		{"a target field the type does not have", opstasktest.CRD, &tasks.Options{TargetField: "etcdName"},
			"spec.etcdName, the target field, is not in the schema"},
		{"lastErrors unbounded", edit("                maxItems: 10\n", ""), opts,
			"status.lastErrors: maxItems <nil>, want opstask.MaxLastErrors (10)"},
		{"steps unbounded", edit("                maxItems: 32\n                type: array\n            type: object\n", "                type: array\n            type: object\n"), opts,
			"status.steps: maxItems <nil>, want opstask.MaxSteps (32)"},
		{"approvals unbounded", edit("                maxItems: 32\n                type: array\n              lastErrors:", "                type: array\n              lastErrors:"), opts,
			"status.approvals: maxItems <nil>, want opstask.MaxApprovals (32)"},
		{"a status without startedWith", edit("              startedWith:", "              startedWithout:"), opts,
			"status: field startedWith of opstask.Status is not in the schema"},
		{"config may be removed and put back", edit("            required:\n            - config\n", ""), opts,
			"spec.config may be removed, and put back with other values, after creation"},
		{"spec may be removed and put back", edit("        required:\n        - spec\n", ""), opts,
			"spec may be removed, and put back with another config, after creation"},
		{"no status subresource", edit("    subresources:\n      status: {}\n", ""), opts,
			"has no status subresource: add // +kubebuilder:subresource:status"},
		{"another kind", edit("kind: TestTask\n", "kind: OtherTask\n"), opts,
			`spec.names.kind "OtherTask"`},
		{"not a CRD", []byte("apiVersion: v1\nkind: ConfigMap\ndata: {}\n"), opts,
			`unknown field "data"`},
	}
	// A config that is not required is safe with the rule that it cannot
	// be added or removed.
	ruled := edit("            required:\n            - config\n            type: object\n            x-kubernetes-validations:\n",
		"            type: object\n            x-kubernetes-validations:\n            - message: config cannot be added or removed after creation\n              rule: has(self.config) == has(oldSelf.config)\n")
	if _, err := tasks.CRD(ruled, &opstasktest.TestTask{}, scheme, opts); err != nil {
		t.Errorf("an optional config that cannot be added or removed: %v", err)
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tasks.CRD(tc.crd, &opstasktest.TestTask{}, scheme, tc.opts)
			if !errors.Is(err, opstask.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidConfig with %q", err, tc.want)
			}
		})
	}
}

// InstallCRD installs a task CRD through a manager's clients before the
// manager starts, upgrades it in place, and the API server then enforces
// its rules: a task with two config members, or none, is refused.
func TestInstallCRDAndTheServerEnforcesTheOneOf(t *testing.T) {
	env := testenv.StartKubernetes(t)
	mgr := newTaskManager(t, env) // installs (or upgrades) it
	crd, err := tasks.CRD(opstasktest.CRD, &opstasktest.TestTask{}, mgr.GetScheme(), &tasks.Options{TargetField: opstasktest.TargetField})
	if err != nil {
		t.Fatal(err)
	}
	// Several installers upgrade it at once (replicas, parallel tests):
	// each succeeds.
	crd.Labels = map[string]string{"upgraded-by": t.Name()[:40]}
	errs := make(chan error, 4)
	for range cap(errs) {
		go func() { errs <- tasks.InstallCRD(t.Context(), mgr.GetClient(), mgr.GetAPIReader(), crd.DeepCopy()) }()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Errorf("concurrent upgrade: %v", err)
		}
	}
	got := &unstructured.Unstructured{}
	got.SetAPIVersion("apiextensions.k8s.io/v1")
	got.SetKind("CustomResourceDefinition")
	if err := mgr.GetAPIReader().Get(t.Context(), client.ObjectKey{Name: crd.Name}, got); err != nil {
		t.Fatal(err)
	}
	if got.GetLabels()["upgraded-by"] != crd.Labels["upgraded-by"] {
		t.Errorf("labels after the upgrade: %v", got.GetLabels())
	}

	c := mgr.GetClient()
	for i, tc := range []struct {
		name   string
		config map[string]any
		want   string
	}{
		{"two config members", map[string]any{"alpha": map[string]any{}, "beta": map[string]any{}}, "must have at most 1 item"},
		{"no config member", map[string]any{}, "should have at least 1 properties"},
	} {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"config": tc.config, opstasktest.TargetField: "main"}}}
		u.SetGroupVersionKind(opstasktest.GroupVersionKind)
		u.SetNamespace(env.Namespace)
		u.SetName("bad-" + string(rune('a'+i)))
		if err := c.Create(t.Context(), u); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want Invalid with %q", tc.name, err, tc.want)
		} else {
			t.Logf("%s: the API server said: %v", tc.name, err)
		}
	}
}

// crdClient returns a client of env's API server without a cache, which
// InstallCRD may use as its client and its reader.
func crdClient(t *testing.T, env *testenv.Kubernetes) client.Client {
	t.Helper()
	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ownGroup returns TestTask's generated CRD moved to an API group of the
// test's own, so that a test may change and install it without touching
// the TestTask CRD that other tests of the process share, and a scheme in
// which TestTask is of that group; the CRD is deleted when the test ends.
func ownGroup(t *testing.T, c client.Client, group string, crdYAML []byte) ([]byte, *runtime.Scheme, schema.GroupVersionKind) {
	t.Helper()
	crdYAML = bytes.ReplaceAll(crdYAML, []byte(opstasktest.GroupVersionKind.Group), []byte(group))
	gvk := schema.GroupVersionKind{Group: group, Version: opstasktest.GroupVersionKind.Version, Kind: opstasktest.GroupVersionKind.Kind}
	scheme := runtime.NewScheme()
	scheme.AddKnownTypeWithName(gvk, &opstasktest.TestTask{})
	t.Cleanup(func() {
		crd := &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		crd.SetName("testtasks." + group)
		_ = c.Delete(context.Background(), crd)
	})
	return crdYAML, scheme, gvk
}

// A transition rule is not evaluated when its field is absent on one side:
// with a config that is neither required nor guarded by
// "has(self.config) == has(oldSelf.config)", the API server lets a person
// remove a task's config and put it back with other values, past "config
// is immutable". CRD refuses such a CRD; with the rule it asks for, the
// API server refuses the removal.
func TestCRDConfigCannotBeRemovedAndPutBack(t *testing.T) {
	env := testenv.StartKubernetes(t)
	c := crdClient(t, env)
	opts := &tasks.Options{TargetField: opstasktest.TargetField}
	optional := bytes.Replace(opstasktest.CRD, []byte("            required:\n            - config\n"), nil, 1)
	ruled := bytes.Replace(optional, []byte("\n            x-kubernetes-validations:\n"), []byte("\n            x-kubernetes-validations:\n"+
		"            - message: config cannot be added or removed after creation\n"+
		"              rule: has(self.config) == has(oldSelf.config)\n"), 1)
	if bytes.Equal(optional, opstasktest.CRD) || bytes.Equal(ruled, optional) {
		t.Fatal("the generated CRD no longer has the text this test edits")
	}

	// What the API server does with each: create a task, remove its
	// config, put another one back.
	removeAndPutBack := func(t *testing.T, gvk schema.GroupVersionKind) (removed, putBack error) {
		t.Helper()
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"config":                map[string]any{"alpha": map[string]any{"keep": "backups"}},
			opstasktest.TargetField: "main",
		}}}
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(env.Namespace)
		u.SetName("recover")
		if err := c.Create(t.Context(), u); err != nil {
			t.Fatal(err)
		}
		unstructured.RemoveNestedField(u.Object, "spec", "config")
		if removed = c.Update(t.Context(), u); removed != nil {
			return removed, nil
		}
		_ = unstructured.SetNestedMap(u.Object, map[string]any{"beta": map[string]any{"drop": "everything"}}, "spec", "config")
		return nil, c.Update(t.Context(), u)
	}

	t.Run("optional config without the rule", func(t *testing.T) {
		crdYAML, scheme, gvk := ownGroup(t, c, "unruled.crt.groundskeeper.io", optional)
		_, err := tasks.CRD(crdYAML, &opstasktest.TestTask{}, scheme, opts)
		if !errors.Is(err, opstask.ErrInvalidConfig) || !strings.Contains(err.Error(), "spec.config may be removed, and put back with other values") {
			t.Fatalf("CRD of a CRD whose config may be removed: %v; want it refused", err)
		}
		// Installed all the same (kubectl apply), it lets the config be
		// swapped: why CRD refuses it.
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(crdYAML, crd); err != nil {
			t.Fatal(err)
		}
		if err := tasks.InstallCRD(t.Context(), c, c, crd); err != nil {
			t.Fatal(err)
		}
		removed, putBack := removeAndPutBack(t, gvk)
		if removed != nil || putBack != nil {
			t.Fatalf("without the rule: removal %v, put back %v; want both let through (else this test shows nothing)", removed, putBack)
		}
		t.Log("without the rule, the API server let the config be removed and another put back")
	})

	t.Run("optional config with the rule", func(t *testing.T) {
		crdYAML, scheme, gvk := ownGroup(t, c, "ruled.crt.groundskeeper.io", ruled)
		crd, err := tasks.CRD(crdYAML, &opstasktest.TestTask{}, scheme, opts)
		if err != nil {
			t.Fatalf("CRD of a CRD whose config cannot be added or removed: %v", err)
		}
		if err := tasks.InstallCRD(t.Context(), c, c, crd); err != nil {
			t.Fatal(err)
		}
		removed, _ := removeAndPutBack(t, gvk)
		if !apierrors.IsInvalid(removed) || !strings.Contains(removed.Error(), "config cannot be added or removed after creation") {
			t.Fatalf("removing the config: %v; want Invalid with the rule's message", removed)
		}
		t.Logf("the API server said: %v", removed)
	})
}

// A replica of an older release restarting during a rolling update (or
// after a rollback) installs its CRD, which lacks the newer status fields:
// InstallCRD leaves the newer CRD installed, so that the API server does
// not prune those fields from every task. The newer CRD still replaces an
// older one, and one of the same properties replaces the installed.
func TestInstallCRDNeverDowngrades(t *testing.T) {
	env := testenv.StartKubernetes(t)
	c := crdClient(t, env)
	crdYAML, scheme, gvk := ownGroup(t, c, "downgrade.crt.groundskeeper.io", opstasktest.CRD)
	newer, err := tasks.CRD(crdYAML, &opstasktest.TestTask{}, scheme, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The same CRD as an older release generated it: without
	// status.approvals and status.startedWith.
	older := newer.DeepCopy()
	status := older.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"]
	delete(status.Properties, "approvals")
	delete(status.Properties, "startedWith")
	older.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"] = status
	older.Labels = map[string]string{"release": "older"}
	newer.Labels = map[string]string{"release": "newer"}

	installed := func() (*apiextensionsv1.CustomResourceDefinition, string) {
		t.Helper()
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("apiextensions.k8s.io/v1")
		u.SetKind("CustomResourceDefinition")
		if err := c.Get(t.Context(), client.ObjectKey{Name: newer.Name}, u); err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
			t.Fatal(err)
		}
		_, has := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"].Properties["approvals"]
		return crd, fmt.Sprintf("release %s, status.approvals %t", crd.Labels["release"], has)
	}

	// An upgrade: older installed, then newer.
	if err := tasks.InstallCRD(t.Context(), c, c, older.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if err := tasks.InstallCRD(t.Context(), c, c, newer.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if _, got := installed(); got != "release newer, status.approvals true" {
		t.Fatalf("after the upgrade: %s", got)
	}

	// A task whose status has the newer fields.
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"config": map[string]any{"alpha": map[string]any{}}}}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(env.Namespace)
	u.SetName("gated")
	if err := c.Create(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	u.Object["status"] = map[string]any{
		"state":       "InProgress",
		"approvals":   []any{map[string]any{"step": "upload", "state": "AwaitingApproval", "token": "upload/0a1b2c3d4e", "lastUpdateTime": "2026-11-22T10:00:00Z"}},
		"startedWith": map[string]any{"kind": "alpha", "configDigest": "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
	}
	if err := c.Status().Update(t.Context(), u); err != nil {
		t.Fatal(err)
	}

	// The older release's replica restarts: its CRD is not installed.
	if err := tasks.InstallCRD(t.Context(), c, c, older.DeepCopy()); err != nil {
		t.Fatalf("the older CRD over the newer: %v; want nil (left as it is)", err)
	}
	if _, got := installed(); got != "release newer, status.approvals true" {
		t.Fatalf("after the older release installed its CRD: %s; want the newer left as it is", got)
	}
	// A status write through the (kept) newer schema keeps the fields.
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(u), u); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(u.Object, "Failed", "status", "state")
	if err := c.Status().Update(t.Context(), u); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(t.Context(), client.ObjectKeyFromObject(u), u); err != nil {
		t.Fatal(err)
	}
	if a, _, _ := unstructured.NestedSlice(u.Object, "status", "approvals"); len(a) != 1 {
		t.Errorf("status.approvals after the older release started: %v; want the approval kept", a)
	}
	if k, _, _ := unstructured.NestedString(u.Object, "status", "startedWith", "kind"); k != "alpha" {
		t.Errorf("status.startedWith.kind after the older release started: %q; want alpha", k)
	}

	// The same properties: replaced (here, a label changes).
	same := newer.DeepCopy()
	same.Labels = map[string]string{"release": "newer-relabelled"}
	if err := tasks.InstallCRD(t.Context(), c, c, same); err != nil {
		t.Fatal(err)
	}
	if _, got := installed(); got != "release newer-relabelled, status.approvals true" {
		t.Errorf("after a CRD of the same properties: %s; want it installed", got)
	}
}
