package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BackupBucket is a bucket in an object store that the backups of many
// clusters share, each under its own prefix (a BackupEntry). It is
// cluster-scoped, like Gardener's BackupBucket: it belongs to no project.
// The bucket itself is provisioned outside this controller; deleting the
// resource never deletes the bucket or its data.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=bb
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`
// +kubebuilder:printcolumn:name="Entries",type=integer,JSONPath=`.status.entries`
// +kubebuilder:printcolumn:name="Max",type=integer,JSONPath=`.spec.maxEntries`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BackupBucket struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BackupBucketSpec   `json:"spec"`
	Status BackupBucketStatus `json:"status,omitempty"`
}

// BackupBucketSpec says where the bucket is and how many entries it holds.
type BackupBucketSpec struct {
	// URL of the bucket, in gocloud.dev/blob's form; its scheme picks the
	// provider: s3://name?region=eu-west-1 (endpoint= and
	// use_path_style=true for S3-compatible stores), gs://name,
	// azblob://container, file:///dir, mem://.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^(s3|gs|azblob|file|mem)://`
	URL string `json:"url"`
	// SecretRef names the Secret with the provider's credentials, with the
	// keys of Gardener's provider extensions (S3: accessKeyID,
	// secretAccessKey; GCS: serviceaccount.json; Azure: storageAccount,
	// storageKey). Not needed for file:// and mem://.
	// +optional
	SecretRef *SecretReference `json:"secretRef,omitempty"`
	// MaxEntries is the most prefixes the bucket may hold (Gardener's
	// controller.backupInfrastructure.quota); 0 means no limit. An entry
	// beyond it is refused and gets no prefix.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxEntries int `json:"maxEntries,omitempty"`
}

// SecretReference names a Secret in a namespace.
type SecretReference struct {
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// BackupBucketStatus counts the bucket's entries.
type BackupBucketStatus struct {
	// Entries is the number of BackupEntries that name this bucket.
	Entries int `json:"entries"`
	// Admitted is the number of them that have a prefix in it.
	Admitted int `json:"admitted"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// BackupBucketList is a list of BackupBuckets.
//
// +kubebuilder:object:root=true
type BackupBucketList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackupBucket `json:"items"`
}

// BackupEntry is one cluster's backups in a shared BackupBucket: the prefix
// "<name>/" of the bucket. Its name follows Gardener's convention,
// shoot--<project>--<shoot>--<uid>, so that a new cluster of the same name
// never shares a prefix with a deleted one. It is cluster-scoped, like the
// seed cluster's BackupEntry: the API server then keeps entry names, and so
// prefixes, unique across the whole cluster.
//
// When it is deleted, its prefix is deleted from the bucket once the
// deletion grace period has passed (at once with the
// backup.examples.groundskeeper.io/force-deletion: "true" annotation), and
// only then is its finalizer removed.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=be
// +kubebuilder:printcolumn:name="Bucket",type=string,JSONPath=`.spec.bucketName`
// +kubebuilder:printcolumn:name="Prefix",type=string,JSONPath=`.status.prefix`
// +kubebuilder:printcolumn:name="Admitted",type=string,JSONPath=`.status.conditions[?(@.type=="Admitted")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BackupEntry struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BackupEntrySpec   `json:"spec"`
	Status BackupEntryStatus `json:"status,omitempty"`
}

// BackupEntrySpec names the bucket and the cluster.
type BackupEntrySpec struct {
	// BucketName is the BackupBucket that holds the entry's prefix.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="bucketName is immutable"
	BucketName string `json:"bucketName"`
	// ShootUID is the UID of the cluster whose backups these are, to find
	// it back; the controller does not use it.
	// +optional
	ShootUID string `json:"shootUID,omitempty"`
}

// BackupEntryStatus says where the entry's data is and what happens to it.
type BackupEntryStatus struct {
	// Prefix is the entry's prefix in the bucket, set once the entry is
	// admitted: the cluster's backups go under it.
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// DeleteAfter is when the prefix of a deleted entry will be deleted.
	// +optional
	DeleteAfter *metav1.Time `json:"deleteAfter,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// BackupEntryList is a list of BackupEntries.
//
// +kubebuilder:object:root=true
type BackupEntryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackupEntry `json:"items"`
}
