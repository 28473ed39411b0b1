package tasks

import (
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

// lackedBy decides what a downgrade is: anything the installed CRD has
// that the next lacks and the API server would then lose.
func TestLackedBy(t *testing.T) {
	obj := func(props map[string]apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		return apiextensionsv1.JSONSchemaProps{Type: "object", Properties: props}
	}
	str := apiextensionsv1.JSONSchemaProps{Type: "string"}
	step := obj(map[string]apiextensionsv1.JSONSchemaProps{"name": str, "result": str})
	status := func(withSteps bool, stepSchema apiextensionsv1.JSONSchemaProps) apiextensionsv1.JSONSchemaProps {
		p := map[string]apiextensionsv1.JSONSchemaProps{"state": str}
		if withSteps {
			p["steps"] = apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &stepSchema}}
		}
		return obj(p)
	}
	version := func(name string, storage bool, root apiextensionsv1.JSONSchemaProps) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &root}}
	}
	crd := func(versions ...apiextensionsv1.CustomResourceDefinitionVersion) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{Versions: versions}}
	}
	withSteps := obj(map[string]apiextensionsv1.JSONSchemaProps{"status": status(true, step)})
	withoutSteps := obj(map[string]apiextensionsv1.JSONSchemaProps{"status": status(false, step)})
	lessStep := obj(map[string]apiextensionsv1.JSONSchemaProps{"status": status(true, obj(map[string]apiextensionsv1.JSONSchemaProps{"name": str}))})
	preserved := obj(map[string]apiextensionsv1.JSONSchemaProps{"status": {Type: "object", XPreserveUnknownFields: ptr.To(true)}})
	for _, tc := range []struct {
		name            string
		installed, next *apiextensionsv1.CustomResourceDefinition
		want            []string
	}{
		{"the same", crd(version("v1", true, withSteps)), crd(version("v1", true, withSteps)), nil},
		{"an upgrade adds a field", crd(version("v1", true, withoutSteps)), crd(version("v1", true, withSteps)), nil},
		{"a downgrade lacks a field", crd(version("v1", true, withSteps)), crd(version("v1", true, withoutSteps)), []string{"v1: status.steps"}},
		{"a downgrade lacks a field of list items", crd(version("v1", true, withSteps)), crd(version("v1", true, lessStep)), []string{"v1: status.steps[*].result"}},
		{"a subtree kept whole lacks nothing", crd(version("v1", true, withSteps)), crd(version("v1", true, preserved)), nil},
		{"a downgrade lacks the storage version", crd(version("v1alpha1", false, withSteps), version("v1", true, withSteps)), crd(version("v1alpha1", true, withSteps)),
			[]string{"version v1 (the storage version)"}},
		{"an upgrade drops an old version", crd(version("v1alpha1", false, withSteps), version("v1", true, withSteps)), crd(version("v1", true, withSteps)), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lackedBy(tc.installed, tc.next); !slices.Equal(got, tc.want) {
				t.Errorf("lackedBy = %q, want %q", got, tc.want)
			}
		})
	}
}
