package api

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group, version, kind and resource of ReplicatedSet.
const (
	Group    = "apps.examples.groundskeeper.io"
	Version  = "v1alpha1"
	Kind     = "ReplicatedSet"
	Resource = "replicatedsets"
)

var (
	GroupVersionKind     = schema.GroupVersionKind{Group: Group, Version: Version, Kind: Kind}
	GroupVersionResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}
)

// SetLabel is the label on the pods and claims of a set; its value is the
// set's name.
const SetLabel = Group + "/replicated-set"

// CondemnedByAnnotation is set on a pod just before a scale-down deletes
// it: the resourceVersion of the set, read from the API server, whose
// spec.replicas condemned it. A scale-up written after that read, before
// the delete, cannot stop it (no precondition spans two objects); the
// annotation says which state of the set the deletion was decided on.
const CondemnedByAnnotation = Group + "/condemned-by-set-version"

// ReplicatedSet runs spec.replicas pods named <set>-<ordinal>, each with one
// claim per volume claim template, named <template>-<set>-<ordinal>, as a
// StatefulSet does.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas
// +kubebuilder:resource:shortName=rset,scope=Namespaced
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.status.policy`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ReplicatedSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ReplicatedSetSpec `json:"spec"`
	// +optional
	Status ReplicatedSetStatus `json:"status,omitempty"`
}

// ReplicatedSetList is a list of ReplicatedSet.
// +kubebuilder:object:root=true
type ReplicatedSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ReplicatedSet `json:"items"`
}

// ReplicatedSetSpec is the desired state of a ReplicatedSet.
// +kubebuilder:validation:XValidation:rule="!(has(self.persistentVolumeClaimRetentionPolicy) && has(self.persistentVolumeClaimDeletePolicy))",message="set persistentVolumeClaimRetentionPolicy or persistentVolumeClaimDeletePolicy, not both"
type ReplicatedSetSpec struct {
	// Replicas is the number of pods. A scale-down removes the highest
	// ordinals first, one at a time.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`
	// Template is what each pod runs.
	Template PodTemplate `json:"template"`
	// VolumeClaimTemplates are the claims each pod mounts, at
	// /data/<name>. Changing them does not change existing claims.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	VolumeClaimTemplates []ClaimTemplate `json:"volumeClaimTemplates,omitempty"`
	// PersistentVolumeClaimRetentionPolicy says what happens to the claims
	// when the set is deleted and when a scale-down removes their pod, in
	// the form StatefulSets have. Unset: Retain on both.
	// +optional
	PersistentVolumeClaimRetentionPolicy *RetentionPolicy `json:"persistentVolumeClaimRetentionPolicy,omitempty"`
	// PersistentVolumeClaimDeletePolicy is the same choice as one of
	// KEP-1847's four named policies ("StatefulSet" spelled "Owner"). Set
	// this or persistentVolumeClaimRetentionPolicy, not both.
	// +optional
	// +kubebuilder:validation:Enum=Retain;DeleteOnOwnerDeletionOnly;DeleteOnScaledownOnly;DeleteOnScaledownAndOwnerDeletion
	PersistentVolumeClaimDeletePolicy string `json:"persistentVolumeClaimDeletePolicy,omitempty"`
}

// PodTemplate is the small part of a pod spec this example lets users set.
type PodTemplate struct {
	// Image is the container image.
	// +kubebuilder:validation:MinLength=1
	Image string `json:"image"`
	// Command overrides the image's entrypoint.
	// +optional
	Command []string `json:"command,omitempty"`
	// TerminationGracePeriodSeconds is how long a deleted pod may take to
	// stop, its claims still mounted (a database flushing its writes);
	// unset: Kubernetes' default, 30 s.
	// +optional
	// +kubebuilder:validation:Minimum=0
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds,omitempty"`
}

// ClaimTemplate describes the claim each pod gets.
type ClaimTemplate struct {
	// Name of the template; the claims are named <name>-<set>-<ordinal>.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Size is the storage request.
	Size resource.Quantity `json:"size"`
	// StorageClassName of the claims; unset: the cluster's default class.
	// +optional
	StorageClassName *string `json:"storageClassName,omitempty"`
}

// RetentionPolicy is a StatefulSet's persistentVolumeClaimRetentionPolicy.
type RetentionPolicy struct {
	// WhenDeleted applies when the set is deleted (with cascading
	// deletion). Unset: Retain.
	// +optional
	// +kubebuilder:validation:Enum=Retain;Delete
	WhenDeleted string `json:"whenDeleted,omitempty"`
	// WhenScaled applies to the claims of a pod that a scale-down removes.
	// Unset: Retain.
	// +optional
	// +kubebuilder:validation:Enum=Retain;Delete
	WhenScaled string `json:"whenScaled,omitempty"`
}

// ReplicatedSetStatus is the observed state of a ReplicatedSet.
type ReplicatedSetStatus struct {
	// ObservedGeneration is the generation this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Replicas is the number of pods that exist and are not being deleted.
	// +optional
	Replicas int32 `json:"replicas"`
	// Policy is the KEP-1847 name of the retention policy in force.
	// +optional
	Policy string `json:"policy,omitempty"`
	// Conditions: ClaimsReady says whether every claim of every pod in
	// range exists and follows the policy.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
