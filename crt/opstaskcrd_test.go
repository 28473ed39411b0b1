package crt_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/opstasktest"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// TaskCRD accepts the generated CRD of opstasktest's TestTask and refuses
// each way a CRD can differ from its type or lack a rule opstask needs,
// naming the field (and the marker to add).
func TestTaskCRDRefusesDriftAndMissingRules(t *testing.T) {
	scheme := taskScheme(t)
	opts := &crt.TaskOptions{TargetField: opstasktest.TargetField}
	if _, err := crt.TaskCRD(opstasktest.CRD, &opstasktest.TestTask{}, scheme, opts); err != nil {
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
		opts *crt.TaskOptions
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
		{"a target field the type does not have", opstasktest.CRD, &crt.TaskOptions{TargetField: "etcdName"},
			"spec.etcdName, the target field, is not in the schema"},
		{"lastErrors unbounded", edit("                maxItems: 10\n", ""), opts,
			"status.lastErrors: maxItems <nil>, want opstask.MaxLastErrors (10)"},
		{"steps unbounded", edit("                maxItems: 32\n", ""), opts,
			"status.steps: maxItems <nil>, want opstask.MaxSteps (32)"},
		{"no status subresource", edit("    subresources:\n      status: {}\n", ""), opts,
			"has no status subresource: add // +kubebuilder:subresource:status"},
		{"another kind", edit("kind: TestTask\n", "kind: OtherTask\n"), opts,
			`spec.names.kind "OtherTask"`},
		{"not a CRD", []byte("apiVersion: v1\nkind: ConfigMap\ndata: {}\n"), opts,
			`unknown field "data"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := crt.TaskCRD(tc.crd, &opstasktest.TestTask{}, scheme, tc.opts)
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
	crd, err := crt.TaskCRD(opstasktest.CRD, &opstasktest.TestTask{}, mgr.GetScheme(), &crt.TaskOptions{TargetField: opstasktest.TargetField})
	if err != nil {
		t.Fatal(err)
	}
	// Several installers upgrade it at once (replicas, parallel tests):
	// each succeeds.
	crd.Labels = map[string]string{"upgraded-by": t.Name()[:40]}
	errs := make(chan error, 4)
	for range cap(errs) {
		go func() { errs <- crt.InstallCRD(t.Context(), mgr.GetClient(), mgr.GetAPIReader(), crd.DeepCopy()) }()
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
