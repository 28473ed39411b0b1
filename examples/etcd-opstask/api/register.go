package api

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
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

	// SchemeBuilder registers EtcdOpsTask and EtcdOpsTaskList.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds them to a scheme, for a manager's typed client.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&EtcdOpsTask{}, &EtcdOpsTaskList{})
}

// TargetField is the spec field that names the target: DEP-05's etcdName.
const TargetField = "etcdName"
