package api

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/opstask"
)

// EtcdOpsTask is an out-of-band operator task on an etcd cluster (DEP-05).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=eot,scope=Namespaced
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Etcd",type=string,JSONPath=`.spec.etcdName`
// +kubebuilder:printcolumn:name="Operation",type=string,JSONPath=`.status.lastOperation.type`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdOpsTask struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the task's specification. It cannot change after creation.
	Spec EtcdOpsTaskSpec `json:"spec"`
	// Status is the most recently observed status of the task.
	// +optional
	Status opstask.Status `json:"status,omitempty"`
}

// EtcdOpsTaskList is a list of EtcdOpsTask.
// +kubebuilder:object:root=true
type EtcdOpsTaskList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdOpsTask `json:"items"`
}

// EtcdOpsTaskSpec is the specification of an EtcdOpsTask.
// +kubebuilder:validation:XValidation:rule="has(self.etcdName) == has(oldSelf.etcdName)",message="etcdName cannot be added or removed after creation"
// +kubebuilder:validation:XValidation:rule="has(self.ttlSecondsAfterFinished) == has(oldSelf.ttlSecondsAfterFinished)",message="ttlSecondsAfterFinished cannot be added or removed after creation"
type EtcdOpsTaskSpec struct {
	// Config is the configuration of the operation. Exactly one of its
	// members must be set; which one determines the kind of task.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="config is immutable"
	Config EtcdOpsTaskConfig `json:"config"`
	// TTLSecondsAfterFinished is how long a finished task (Succeeded, Failed
	// or Rejected) is kept before it is deleted. The controller's default
	// applies when it is not set.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="ttlSecondsAfterFinished is immutable"
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`
	// EtcdName is the name of the Etcd resource, in the task's namespace,
	// that the task operates on. Tasks without one (copying backups) are
	// queued together per namespace.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="etcdName is immutable"
	EtcdName *string `json:"etcdName,omitempty"`
}

// EtcdOpsTaskConfig is the one-of task configuration: exactly one member is
// set. Kinds without configuration are set to the empty object ({}).
// +kubebuilder:validation:XValidation:rule="[has(self.onDemandSnapshot), has(self.onDemandMaintenance), has(self.snapshotCompaction), has(self.recoverFromQuorumLoss), has(self.copyBackups)].exists_one(x, x)",message="exactly one of onDemandSnapshot, onDemandMaintenance, snapshotCompaction, recoverFromQuorumLoss, copyBackups must be set"
type EtcdOpsTaskConfig struct {
	// OnDemandSnapshot takes a full or delta snapshot now.
	// +optional
	OnDemandSnapshot *OnDemandSnapshotConfig `json:"onDemandSnapshot,omitempty"`
	// OnDemandMaintenance compacts and/or defragments etcd now.
	// +optional
	OnDemandMaintenance *OnDemandMaintenanceConfig `json:"onDemandMaintenance,omitempty"`
	// SnapshotCompaction compacts the snapshots in the backup bucket now.
	// +optional
	SnapshotCompaction *SnapshotCompactionConfig `json:"snapshotCompaction,omitempty"`
	// RecoverFromQuorumLoss recovers a multi-member cluster from a permanent
	// loss of quorum.
	// +optional
	RecoverFromQuorumLoss *RecoverFromQuorumLossConfig `json:"recoverFromQuorumLoss,omitempty"`
	// CopyBackups copies backups from one object store to another.
	// +optional
	CopyBackups *CopyBackupsConfig `json:"copyBackups,omitempty"`
}

// OnDemandSnapshotType is full or delta.
// +kubebuilder:validation:Enum=full;delta
type OnDemandSnapshotType string

// The snapshot types.
const (
	SnapshotTypeFull  OnDemandSnapshotType = "full"
	SnapshotTypeDelta OnDemandSnapshotType = "delta"
)

// OnDemandSnapshotConfig configures an on-demand snapshot.
// +kubebuilder:validation:XValidation:rule="self.type == 'delta' ? !has(self.isFinal) || !self.isFinal : true",message="isFinal may be true only for a full snapshot"
type OnDemandSnapshotConfig struct {
	// Type is full or delta.
	Type OnDemandSnapshotType `json:"type"`
	// IsFinal marks the snapshot as the final one of the cluster.
	// +optional
	IsFinal *bool `json:"isFinal,omitempty"`
	// TimeoutSecondsDelta bounds a delta snapshot. Defaults to 60.
	// +optional
	// +kubebuilder:default=60
	// +kubebuilder:validation:Minimum=1
	TimeoutSecondsDelta *int32 `json:"timeoutSecondsDelta,omitempty"`
	// TimeoutSecondsFull bounds a full snapshot. Defaults to 480.
	// +optional
	// +kubebuilder:default=480
	// +kubebuilder:validation:Minimum=1
	TimeoutSecondsFull *int32 `json:"timeoutSecondsFull,omitempty"`
}

// OnDemandMaintenanceConfig configures on-demand maintenance.
type OnDemandMaintenanceConfig struct {
	// MaintenanceType says which maintenance operations to run.
	MaintenanceType MaintenanceOps `json:"maintenanceType"`
}

// MaintenanceOps are the maintenance operations.
type MaintenanceOps struct {
	// EtcdCompaction compacts the etcd keyspace.
	// +optional
	EtcdCompaction bool `json:"etcdCompaction,omitempty"`
	// EtcdDefragmentation defragments the etcd members.
	// +optional
	EtcdDefragmentation bool `json:"etcdDefragmentation,omitempty"`
}

// SnapshotCompactionConfig has no fields: set it to {}.
type SnapshotCompactionConfig struct{}

// RecoverFromQuorumLossConfig configures a recovery from a permanent loss
// of quorum. With no fields set ({}), the recovery states its recovery
// point and waits for a person to approve it, and refuses to lose data a
// surviving member has.
type RecoverFromQuorumLossConfig struct {
	// AllowDataLoss lets the recovery restore from backups older than the
	// data of a surviving member: the revisions after the recovery point
	// are lost. Without it, every member is asked for its revision again
	// before any is stopped, and a member that does not answer (its data
	// cannot be compared with the recovery point) refuses the recovery.
	// +optional
	AllowDataLoss bool `json:"allowDataLoss,omitempty"`
	// SkipApproval starts the recovery without waiting for a person to
	// approve its recovery point (the annotation
	// opstask.groundskeeper.io/approve).
	// +optional
	SkipApproval bool `json:"skipApproval,omitempty"`
}

// CopyBackupsConfig configures a copy of backups between object stores.
type CopyBackupsConfig struct {
	// SourceStore is where the backups are.
	SourceStore StoreSpec `json:"sourceStore"`
	// TargetStore is where they are copied to.
	TargetStore StoreSpec `json:"targetStore"`
	// MaxBackupAge is the maximum age in days of a backup to copy. All
	// backups are copied when it is not set.
	// +optional
	MaxBackupAge *uint32 `json:"maxBackupAge,omitempty"`
	// MaxBackups is the maximum number of backups to copy, newest first.
	// +optional
	MaxBackups *uint32 `json:"maxBackups,omitempty"`
}

// StoreSpec names an object store location.
type StoreSpec struct {
	// Provider is the object store provider (S3, GCS, ABS, ...).
	Provider string `json:"provider"`
	// Container is the bucket or container.
	Container string `json:"container"`
	// Prefix is the key prefix of the backups.
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// SecretRef names the Secret with the store's credentials.
	// +optional
	SecretRef string `json:"secretRef,omitempty"`
}
