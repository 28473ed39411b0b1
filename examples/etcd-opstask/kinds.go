// The task kinds as opstask runs them: each kind's executor, preconditions,
// timeout, duplicate key and resumability, and the checks of a task's spec
// against the flags. What the kinds do on etcd and in the buckets is in
// executors.go.

package main

import (
	"context"
	"fmt"
	"time"

	"github.com/groundskeeper-io/groundskeeper/examples/etcd-opstask/api"
	"github.com/groundskeeper-io/groundskeeper/opstask"
)

// Error codes of the spec checks, recorded in status.lastErrors.
const (
	codeNoEtcd      opstask.ErrorCode = "EtcdNotConfigured"
	codeNoBackups   opstask.ErrorCode = "BackupsNotEnabled"
	codeNothingToDo opstask.ErrorCode = "NothingToDo"
	codeBadStore    opstask.ErrorCode = "UnsupportedStore"
)

// kinds are DEP-05's five task kinds, each with its preconditions as the
// DEP lists them. "Not already running for the same etcd" is opstask's
// duplicate check (DuplicateKey), not a precondition.
func (o *operator) kinds() []opstask.Handler {
	oneAtATime := func(*opstask.Task) (string, error) { return "", nil } // one at a time, whatever the config
	return []opstask.Handler{{
		Name:          "onDemandSnapshot",
		Executor:      opstask.ExecutorFunc(o.snapshot),
		Preconditions: []opstask.Precondition{o.check(o.hasQuorum), o.check(o.isReady), o.check(o.backupsEnabled)},
		Timeout:       api.SnapshotTimeout,
		DuplicateKey:  api.SnapshotDuplicateKey, // a full and a delta may wait together
		Resumable:     true,                     // taking a snapshot again is harmless
	}, {
		Name:          "onDemandMaintenance",
		Executor:      opstask.ExecutorFunc(o.maintain),
		Preconditions: []opstask.Precondition{opstask.PreconditionFunc(somethingToMaintain), o.check(o.hasQuorum)},
		Resumable:     true, // compaction and defragmentation may run twice
	}, {
		Name:          "snapshotCompaction",
		Executor:      opstask.ExecutorFunc(o.compactSnapshots),
		Preconditions: []opstask.Precondition{o.check(o.backupsEnabled)}, // the bucket, not etcd's health
		DuplicateKey:  oneAtATime,
		Resumable:     true,
	}, {
		Name:          "recoverFromQuorumLoss",
		Executor:      opstask.ExecutorFunc(o.recover),
		Preconditions: []opstask.Precondition{o.check(o.multiMember), o.check(o.lostQuorum)},
		DuplicateKey:  oneAtATime,
		Resumable:     true, // its steps are recorded: resumed at the first unfinished one
		Timeout:       func(*opstask.Task) (time.Duration, error) { return recoveryTimeout, nil },
	}, {
		Name:          "copyBackups",
		Executor:      opstask.ExecutorFunc(o.copyBackups),
		Preconditions: []opstask.Precondition{opstask.PreconditionFunc(supportedStores)},
		DuplicateKey:  oneAtATime,
		Resumable:     true, // the copy manifest resumes where it stopped
	}}
}

// check turns a check of the task's target into a Precondition; a task
// whose etcdName is not configured is rejected.
func (o *operator) check(fn func(ctx context.Context, name string, t *Target) error) opstask.Precondition {
	return opstask.PreconditionFunc(func(ctx context.Context, task *opstask.Task) error {
		name := task.Spec.Target
		t, ok := o.targets[name]
		if !ok {
			return opstask.Unmet(codeNoEtcd, fmt.Sprintf("spec.etcdName %q: no such etcd is configured (--etcd)", name))
		}
		return fn(ctx, name, t)
	})
}

func (o *operator) backupsEnabled(_ context.Context, name string, t *Target) error {
	if t.Backups == nil {
		return opstask.Unmet(codeNoBackups, fmt.Sprintf("etcd %s has no backup store (--backup-store)", name))
	}
	return nil
}

func somethingToMaintain(_ context.Context, t *opstask.Task) error {
	cfg, err := opstask.DecodeConfig[api.OnDemandMaintenanceConfig](t, "onDemandMaintenance")
	if err != nil {
		return err
	}
	if !cfg.MaintenanceType.EtcdCompaction && !cfg.MaintenanceType.EtcdDefragmentation {
		return opstask.Unmet(codeNothingToDo, "spec.config.onDemandMaintenance.maintenanceType: neither etcdCompaction nor etcdDefragmentation is true")
	}
	return nil
}

func supportedStores(_ context.Context, t *opstask.Task) error {
	cfg, err := opstask.DecodeConfig[api.CopyBackupsConfig](t, "copyBackups")
	if err != nil {
		return err
	}
	for _, s := range []struct {
		field string
		spec  api.StoreSpec
	}{{"sourceStore", cfg.SourceStore}, {"targetStore", cfg.TargetStore}} {
		if _, err := providerScheme(s.spec.Provider); err != nil {
			return opstask.Unmet(codeBadStore, fmt.Sprintf("spec.config.copyBackups.%s.provider: %v", s.field, err))
		}
	}
	return nil
}
