// The API group and version of TestTask, for controller-gen. They stand
// apart from the package clause so that they are not part of the package
// documentation.
//
// +groupName=opstasktest.groundskeeper.io
// +versionName=v1

package opstasktest

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/groundskeeper-io/groundskeeper/opstask"
)

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 object crd:crdVersions=v1 paths=. output:crd:dir=crd

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced
// +kubebuilder:object:generate=true

// TestTask is the smallest custom resource a Kubernetes opstask.Store can
// be tested on: DEP-05's spec fields (a one-of config whose members are
// free-form, ttlSecondsAfterFinished, and a target named "target") and an
// opstask.Status, with the rules opstask expects of every task resource
// (exactly one config member; config and target immutable; lastErrors
// bounded). Any member name is a kind, so a test registers the kinds it
// likes. Install it with InstallCRD; a kubestore.Config for it takes
// Resource, GroupVersionKind.Kind and TargetField below.
type TestTask struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec TestTaskSpec `json:"spec"`
	// +optional
	Status opstask.Status `json:"status,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:object:generate=true

// TestTaskList is a list of TestTask.
type TestTaskList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TestTask `json:"items"`
}

// +kubebuilder:validation:XValidation:rule="has(self.target) == has(oldSelf.target)",message="target cannot be added or removed after creation"
// +kubebuilder:object:generate=true

// TestTaskSpec has DEP-05's spec fields.
type TestTaskSpec struct {
	// Config has exactly one member, any object; its name is the kind.
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="config is immutable"
	Config map[string]runtime.RawExtension `json:"config"`
	// +optional
	// +kubebuilder:validation:Minimum=0
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="target is immutable"
	Target *string `json:"target,omitempty"`
}

// CRD is the generated CustomResourceDefinition of TestTask, in YAML.
//
//go:embed crd/opstasktest.groundskeeper.io_testtasks.yaml
var CRD []byte

// What a kubestore.Config for TestTask names.
var (
	// Resource is the TestTask resource.
	Resource = schema.GroupVersionResource{Group: "opstasktest.groundskeeper.io", Version: "v1", Resource: "testtasks"}
	// GroupVersionKind is TestTask's.
	GroupVersionKind = Resource.GroupVersion().WithKind("TestTask")
)

// TargetField is the spec field that names a TestTask's target.
const TargetField = "target"

// InstallCRD creates the TestTask CRD, unless it exists, and waits until
// the API server serves TestTasks. It is cheap once the CRD is served, so
// each test may call it.
func InstallCRD(ctx context.Context, dyn dynamic.Interface) error {
	var obj map[string]any
	if err := yaml.Unmarshal(CRD, &obj); err != nil {
		return fmt.Errorf("opstasktest: CRD: %w", err)
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for created := false; ; {
		// Established can precede the first successful list: wait for that.
		_, err := dyn.Resource(Resource).List(ctx, metav1.ListOptions{Limit: 1})
		if err == nil {
			return nil
		}
		if !created {
			if _, err := crds.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("opstasktest: create CRD: %w", err)
			}
			created = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("opstasktest: %s not served after 60s: %w", Resource.GroupResource(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
