package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AerospikeNamespaceBackup is a backup of one Aerospike namespace to cloud
// storage. The garbage collector deletes its data, then the resource, once
// spec.ttl has passed since the resource was created.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=asnb,scope=Namespaced
// +kubebuilder:printcolumn:name="TTL",type=string,JSONPath=`.spec.ttl`
// +kubebuilder:printcolumn:name="Bucket",type=string,JSONPath=`.spec.storage.bucket`
// +kubebuilder:printcolumn:name="Data deleted",type=string,JSONPath=`.status.conditions[?(@.type=="DataDeleted")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AerospikeNamespaceBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec AerospikeNamespaceBackupSpec `json:"spec"`
	// +optional
	Status AerospikeNamespaceBackupStatus `json:"status,omitempty"`
}

// AerospikeNamespaceBackupList is a list of AerospikeNamespaceBackup.
// +kubebuilder:object:root=true
type AerospikeNamespaceBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AerospikeNamespaceBackup `json:"items"`
}

// AerospikeNamespaceBackupSpec is what to back up, where to, and for how long.
type AerospikeNamespaceBackupSpec struct {
	// Target is the Aerospike cluster and namespace the backup is of.
	Target TargetNamespace `json:"target"`
	// Storage is where the backup data is.
	Storage BackupStorageSpec `json:"storage"`
	// TTL is how long the backup is kept, counted from the resource's
	// creationTimestamp: "30d", "2w", "12h" (days are 24 hours). "0" or
	// "0d" keeps it forever, as does leaving it out.
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(w|d|h|m|s|ms|us|ns))+$|^0$`
	TTL string `json:"ttl,omitempty"`
}

// TargetNamespace names an Aerospike namespace of an AerospikeCluster.
type TargetNamespace struct {
	// Cluster is the name of the AerospikeCluster, in the backup's namespace.
	// +kubebuilder:validation:MinLength=1
	Cluster string `json:"cluster"`
	// Namespace is the Aerospike namespace (not the Kubernetes one).
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
}

// BackupStorageSpec says where backup data is kept: the data of a backup is
// every object under <prefix>/<metadata.namespace>/<metadata.name>/ in the
// bucket.
type BackupStorageSpec struct {
	// Type is the object store: gcs, s3 or azure.
	// +kubebuilder:validation:Enum=gcs;s3;azure
	Type string `json:"type"`
	// Bucket is the bucket (Azure: container) name.
	// +kubebuilder:validation:MinLength=1
	Bucket string `json:"bucket"`
	// Secret is the name of the Secret, in the backup's namespace, holding
	// the credentials: for s3, accessKeyID and secretAccessKey (and
	// optionally region, endpoint, s3ForcePathStyle); for gcs,
	// serviceaccount.json; for azure, storageAccount and storageKey.
	// +kubebuilder:validation:MinLength=1
	Secret string `json:"secret"`
	// Prefix is the key prefix under which backups are written, without a
	// trailing slash. Default "backups".
	// +optional
	// +kubebuilder:validation:Pattern=`^[^/]+(/[^/]+)*$`
	Prefix string `json:"prefix,omitempty"`
}

// AerospikeNamespaceBackupStatus is what the controllers observed.
type AerospikeNamespaceBackupStatus struct {
	// Conditions: DataDeleted is False, with the reason, while the data of
	// an expired backup could not be deleted; the resource is kept until
	// it is.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// GetConditions returns the backup's status conditions: with
// SetConditions, the garbage collector writes its DataDeleted condition
// there (collect.ConditionSetter).
func (b *AerospikeNamespaceBackup) GetConditions() []metav1.Condition { return b.Status.Conditions }

// SetConditions replaces the backup's status conditions.
func (b *AerospikeNamespaceBackup) SetConditions(c []metav1.Condition) { b.Status.Conditions = c }

// ConditionDataDeleted is the condition type the garbage collector sets.
const ConditionDataDeleted = "DataDeleted"

// Reasons of the DataDeleted condition, also used for events.
const (
	// ReasonSecretNotFound: spec.storage.secret does not exist; nothing
	// was deleted.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonInvalidCredentials: the Secret lacks a key the store needs.
	ReasonInvalidCredentials = "InvalidCredentials"
	// ReasonDeletionFailed: the store refused or failed the deletion, or
	// could not be reached; some data may be left.
	ReasonDeletionFailed = "DeletionFailed"
	// ReasonNestedPrefix: another backup's data prefix in the same bucket
	// lies inside this one's, or this one's inside it: deleting this data
	// would delete some of the other's. Neither is deleted until a person
	// moves one of them.
	ReasonNestedPrefix = "NestedPrefix"
	// ReasonRetained: the store keeps some of the data under S3 Object
	// Lock (a retention period or a legal hold); the rest was deleted, and
	// the backup is collected when the retention ends.
	ReasonRetained = "Retained"
)

// DefaultPrefix is spec.storage.prefix when it is empty.
const DefaultPrefix = "backups"
