package main

import (
	"context"
	_ "embed"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/groundskeeper-io/groundskeeper/crt/tasks"
	"github.com/groundskeeper-io/groundskeeper/examples/minidb/api"
	"github.com/groundskeeper-io/groundskeeper/opstask"
)

//go:embed crd/minidb.example.com_minidbtasks.yaml
var taskCRD []byte

// setupTasks installs the MiniDBTask CRD and runs its one kind, reindex.
func setupTasks(ctx context.Context, mgr manager.Manager) error {
	opts := &tasks.Options{TargetField: "database"}
	crd, err := tasks.CRD(taskCRD, &api.MiniDBTask{}, mgr.GetScheme(), opts)
	if err != nil {
		return err
	}
	if err := tasks.InstallCRD(ctx, mgr.GetClient(), mgr.GetAPIReader(), crd); err != nil {
		return err
	}
	c := &tasks.Controller{Object: &api.MiniDBTask{}, Options: opts, Config: opstask.Config{Handlers: []opstask.Handler{{
		Name: "reindex",
		Executor: opstask.ExecutorFunc(func(ctx context.Context, r *opstask.Run) error {
			return r.Progress(ctx, "reindexed") // the made-up database reindexes at once
		}),
		Resumable: true,
	}}}}
	return c.SetupWithManager(mgr)
}
