package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// GroupVersion is the API group and version of ReplicatedSet.
var GroupVersion = GroupVersionKind.GroupVersion()

// SchemeBuilder registers ReplicatedSet and ReplicatedSetList, so that a
// controller-runtime client reads and writes them typed. It needs only
// k8s.io/apimachinery, so that the package stays cheap to import.
var SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &ReplicatedSet{}, &ReplicatedSetList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
})

// AddToScheme adds the types of this package to a scheme.
var AddToScheme = SchemeBuilder.AddToScheme
