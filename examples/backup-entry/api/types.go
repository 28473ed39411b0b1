package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/backupstore/share/migrate"
)

// BackupBucket is a bucket in an object store that the backups of many
// clusters share, each under its own prefix (a BackupEntry). It is
// cluster-scoped, like Gardener's BackupBucket: it belongs to no project.
// A bucket with spec.provider belongs to the pool of its provider and
// region: entries that name no bucket are placed in it while it has room
// (the --quota of its provider), and the controller grows the pool by one
// BackupBucket (and the bucket in the store behind it) when every bucket
// is full. The controller creates the store's bucket of every BackupBucket
// (backupstore.CreateBucket, a no-op when it exists); deleting the resource
// never deletes the bucket or its data.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=bb
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider`
// +kubebuilder:printcolumn:name="Region",type=string,JSONPath=`.spec.region`
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
	// MaxEntries is the most prefixes a bucket outside any pool may hold;
	// 0 means no limit. An entry beyond it is refused and gets no prefix.
	// A pool's bucket (spec.provider set) takes its limit from the
	// controller's --quota for its provider instead (Gardener's
	// controller.backupInfrastructures.quota).
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxEntries int `json:"maxEntries,omitempty"`
	// Provider and Region make the bucket a member of the pool of entries
	// with the same provider and region (the seed's BackupBucket
	// spec.provider, spec.region). Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="provider is immutable"
	// +optional
	Provider string `json:"provider,omitempty"`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="region is immutable"
	// +optional
	Region string `json:"region,omitempty"`
}

// SecretReference names a Secret in a namespace.
type SecretReference struct {
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// Key returns the Secret's namespace and name; both are empty for a nil
// reference.
func (r *SecretReference) Key() (namespace, name string) {
	if r == nil {
		return "", ""
	}
	return r.Namespace, r.Name
}

// BackupBucketStatus counts the bucket's entries.
type BackupBucketStatus struct {
	// Entries is the number of BackupEntries that name this bucket.
	Entries int `json:"entries"`
	// Admitted is the number of them that have a prefix in it.
	Admitted int `json:"admitted"`
	// Claims are the entries placed in a pool's bucket, taken by a status
	// write with the bucket's resourceVersion (pool.Pool), so that two
	// replicas never take its last place twice.
	// +optional
	Claims []string `json:"claims,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// GetConditions returns the bucket's status conditions: with
// SetConditions, share keeps its InUse condition there
// (collect.ConditionSetter).
func (b *BackupBucket) GetConditions() []metav1.Condition { return b.Status.Conditions }

// SetConditions replaces the bucket's status conditions.
func (b *BackupBucket) SetConditions(c []metav1.Condition) { b.Status.Conditions = c }

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
// +kubebuilder:printcolumn:name="Provider",type=string,JSONPath=`.spec.provider`
// +kubebuilder:printcolumn:name="Migration",type=string,JSONPath=`.status.migration.step`
// +kubebuilder:printcolumn:name="Prefix",type=string,JSONPath=`.status.prefix`
// +kubebuilder:printcolumn:name="Admitted",type=string,JSONPath=`.status.conditions[?(@.type=="Admitted")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BackupEntry struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BackupEntrySpec   `json:"spec"`
	Status BackupEntryStatus `json:"status,omitempty"`
}

// BackupEntrySpec names the bucket, or the pool to be placed in, and the
// cluster.
//
// +kubebuilder:validation:XValidation:rule="has(self.bucketName) || has(self.provider)",message="either bucketName or provider is required"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.bucketName) || (has(self.bucketName) && self.bucketName == oldSelf.bucketName)",message="bucketName is immutable once set"
type BackupEntrySpec struct {
	// BucketName is the BackupBucket that holds the entry's prefix. An
	// entry with a provider and no bucket gets one from its pool: the
	// controller sets this field when it places the entry. Immutable once
	// set.
	// +kubebuilder:validation:MinLength=1
	// +optional
	BucketName string `json:"bucketName,omitempty"`
	// Provider and Region name the pool the entry is placed in when it
	// names no bucket: the BackupBuckets of that provider and region.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="provider is immutable"
	// +optional
	Provider string `json:"provider,omitempty"`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="region is immutable"
	// +optional
	Region string `json:"region,omitempty"`
	// MigrateFrom is the cluster's legacy bucket of its own, whose backups
	// are moved into the entry's prefix once the entry is admitted (the
	// seed's "Backward compatibility: Migration"). Immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="migrateFrom is immutable"
	// +optional
	MigrateFrom *LegacyBucket `json:"migrateFrom,omitempty"`
	// ShootUID is the UID of the cluster whose backups these are, to find
	// it back; the controller does not use it.
	// +optional
	ShootUID string `json:"shootUID,omitempty"`
}

// LegacyBucket is a cluster's bucket of its own, before shared buckets,
// and the Deployment that writes its backups there.
type LegacyBucket struct {
	// URL of the legacy bucket, in the form of BackupBucket spec.url.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^(s3|gs|azblob|file|mem)://`
	URL string `json:"url"`
	// SecretRef names the Secret with the legacy bucket's credentials.
	// +optional
	SecretRef *SecretReference `json:"secretRef,omitempty"`
	// Writer is the Deployment that writes the backups (the seed's
	// etcd-main): scaled to 0 while the last objects are copied, and
	// back with the new location in its pod template's annotation
	// backup.examples.groundskeeper.io/backup-location.
	Writer WriterReference `json:"writer"`
}

// WriterReference names a Deployment.
type WriterReference struct {
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
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
	// Migration records the steps of the move from spec.migrateFrom: the
	// next step, the manifest's counts and the downtime (the writer
	// paused), so that a restarted controller resumes where it stopped.
	// +optional
	Migration *migrate.Status `json:"migration,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// GetConditions returns the entry's status conditions: with
// SetConditions, the collector writes its PrefixDeleted condition there,
// share its Admitted and migrate its Migrated (collect.ConditionSetter).
func (e *BackupEntry) GetConditions() []metav1.Condition { return e.Status.Conditions }

// SetConditions replaces the entry's status conditions.
func (e *BackupEntry) SetConditions(c []metav1.Condition) { e.Status.Conditions = c }

// BackupEntryList is a list of BackupEntries.
//
// +kubebuilder:object:root=true
type BackupEntryList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackupEntry `json:"items"`
}

// Shoot is the example's stand-in for Gardener's Shoot: a cluster whose
// backups a BackupEntry holds. The entry carries a controller owner
// reference to it (blockOwnerDeletion false, as in the seed), so that the
// garbage collector deletes the entry when the Shoot goes, and the entry's
// finalizer keeps its prefix for the deletion grace period. The controller
// does not reconcile Shoots: Gardener creates the entry with the Shoot.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster
type Shoot struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec ShootSpec `json:"spec"`
}

// ShootSpec says where the cluster's backups go.
type ShootSpec struct {
	// Provider and Region of the cluster's backups.
	// +optional
	Provider string `json:"provider,omitempty"`
	// +optional
	Region string `json:"region,omitempty"`
}

// ShootList is a list of Shoots.
//
// +kubebuilder:object:root=true
type ShootList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Shoot `json:"items"`
}

// Pool names the pool an entry is placed in: "<provider>/<region>"; ""
// without a provider.
func (s BackupEntrySpec) Pool() string { return poolOf(s.Provider, s.Region) }

// Pool names the pool a bucket belongs to: "<provider>/<region>"; ""
// without a provider.
func (s BackupBucketSpec) Pool() string { return poolOf(s.Provider, s.Region) }

func poolOf(provider, region string) string {
	if provider == "" {
		return ""
	}
	return provider + "/" + region
}
