package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group and Version of EtcdOpsTask.
const (
	Group   = "example.opstask.groundskeeper.io"
	Version = "v1alpha1"
)

var (
	// GroupVersion is the API group and version of EtcdOpsTask.
	GroupVersion = schema.GroupVersion{Group: Group, Version: Version}
	// Resource is the EtcdOpsTask resource, for kubestore and dynamic
	// clients.
	Resource = GroupVersion.WithResource("etcdopstasks")
)

// SchemeBuilder registers EtcdOpsTask and EtcdOpsTaskList, so that a
// controller-runtime client and cache read them typed. It needs only
// k8s.io/apimachinery, so that the package stays cheap to import.
var SchemeBuilder = runtime.NewSchemeBuilder(func(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &EtcdOpsTask{}, &EtcdOpsTaskList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
})

// AddToScheme adds the types of this package to a scheme.
var AddToScheme = SchemeBuilder.AddToScheme

// TargetField is the spec field that names the target: DEP-05's etcdName.
const TargetField = "etcdName"
