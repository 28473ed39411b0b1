package api

import "sigs.k8s.io/controller-runtime/pkg/scheme"

// GroupVersion is the API group and version of ReplicatedSet.
var GroupVersion = GroupVersionKind.GroupVersion()

// SchemeBuilder registers ReplicatedSet and ReplicatedSetList, so that a
// controller-runtime client reads and writes them typed.
var SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

// AddToScheme adds the types of this package to a scheme.
var AddToScheme = SchemeBuilder.AddToScheme

func init() {
	SchemeBuilder.Register(&ReplicatedSet{}, &ReplicatedSetList{})
}
