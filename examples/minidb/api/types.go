// Package api holds the custom resources of the glue trial's made-up
// database: the MiniDB itself, its backups and its one-off tasks. They are
// not glue: the trial counts the code around them.
//
// +groupName=minidb.example.com
// +versionName=v1
// +kubebuilder:object:generate=true
package api

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/groundskeeper-io/groundskeeper/opstask"
)

//go:generate go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.23.0 object crd:crdVersions=v1 paths=. output:crd:dir=../crd

// GroupVersion is the API group of the trial's resources.
var GroupVersion = schema.GroupVersion{Group: "minidb.example.com", Version: "v1"}

// AddToScheme registers the trial's resources.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &MiniDB{}, &MiniDBList{}, &MiniDBBackup{}, &MiniDBBackupList{}, &MiniDBTask{}, &MiniDBTaskList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// MiniDB is a made-up replicated database: one pod and one claim per
// replica.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type MiniDB struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              MiniDBSpec   `json:"spec"`
	Status            MiniDBStatus `json:"status,omitempty"`
}

// MiniDBSpec is what the user asks for.
type MiniDBSpec struct {
	Replicas int32  `json:"replicas"`
	Image    string `json:"image"`
	// Config is the database's configuration; changing it is a reconfigure,
	// which only one operator instance may do at a time.
	Config string `json:"config,omitempty"`
	// ClaimRetention is KEP-1847's policy for the replicas' claims.
	// +optional
	ClaimRetention *appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy `json:"claimRetention,omitempty"`
	// Retention is the backups' retention policy (retention.ParsePolicy),
	// e.g. "last=3".
	Retention string `json:"retention,omitempty"`
}

// MiniDBStatus is what the operator observed and did.
type MiniDBStatus struct {
	Replicas int32 `json:"replicas,omitempty"`
	// AppliedConfig is the configuration the database runs with.
	AppliedConfig string             `json:"appliedConfig,omitempty"`
	Conditions    []metav1.Condition `json:"conditions,omitempty"`
}

// MiniDBList is a list of MiniDBs.
//
// +kubebuilder:object:root=true
type MiniDBList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MiniDB `json:"items"`
}

// MiniDBBackup records one backup of a MiniDB: its data is under Prefix in
// the bucket BucketURL, read with the credentials of Secret.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type MiniDBBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              MiniDBBackupSpec   `json:"spec"`
	Status            MiniDBBackupStatus `json:"status,omitempty"`
}

// MiniDBBackupSpec says whose backup it is and where its data is.
type MiniDBBackupSpec struct {
	Database  string `json:"database"`
	BucketURL string `json:"bucketURL"`
	Prefix    string `json:"prefix"`
	Secret    string `json:"secret,omitempty"`
}

// MiniDBBackupStatus is the backup's outcome.
type MiniDBBackupStatus struct {
	// Phase is Running, Succeeded or Failed.
	Phase       string             `json:"phase,omitempty"`
	CompletedAt *metav1.Time       `json:"completedAt,omitempty"`
	Conditions  []metav1.Condition `json:"conditions,omitempty"`
}

// GetConditions returns the backup's status conditions
// (collect.ConditionSetter).
func (b *MiniDBBackup) GetConditions() []metav1.Condition { return b.Status.Conditions }

// SetConditions replaces the backup's status conditions.
func (b *MiniDBBackup) SetConditions(c []metav1.Condition) { b.Status.Conditions = c }

// MiniDBBackupList is a list of MiniDBBackups.
//
// +kubebuilder:object:root=true
type MiniDBBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MiniDBBackup `json:"items"`
}

// MiniDBTask is a one-off operation on a MiniDB, run by opstask.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
type MiniDBTask struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              MiniDBTaskSpec `json:"spec"`
	Status            opstask.Status `json:"status,omitempty"`
}

// MiniDBTaskSpec names the database and the one operation.
//
// +kubebuilder:validation:XValidation:rule="has(self.database) == has(oldSelf.database)",message="database cannot be added or removed after creation"
type MiniDBTaskSpec struct {
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="config is immutable"
	Config MiniDBTaskConfig `json:"config"`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="database is immutable"
	// +optional
	Database *string `json:"database,omitempty"`
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
}

// MiniDBTaskConfig holds exactly one operation.
//
// +kubebuilder:validation:XValidation:rule="[has(self.reindex)].exists_one(x, x)",message="exactly one of reindex must be set"
type MiniDBTaskConfig struct {
	// +optional
	Reindex *ReindexConfig `json:"reindex,omitempty"`
}

// ReindexConfig rebuilds the database's indexes.
type ReindexConfig struct {
	Table string `json:"table,omitempty"`
}

// MiniDBTaskList is a list of MiniDBTasks.
//
// +kubebuilder:object:root=true
type MiniDBTaskList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MiniDBTask `json:"items"`
}
