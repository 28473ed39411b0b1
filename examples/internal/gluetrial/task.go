package gluetrial

import (
	"context"
	_ "embed"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/groundskeeper-io/groundskeeper/crt"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/gluetrial/api"
	"github.com/groundskeeper-io/groundskeeper/opstask"
)

//go:embed crd/minidb.example.com_minidbtasks.yaml
var taskCRD []byte

// setupTasks installs the MiniDBTask CRD and runs its one kind, reindex.
func setupTasks(ctx context.Context, mgr manager.Manager) error {
	opts := &crt.TaskOptions{TargetField: "database"}
	crd, err := crt.TaskCRD(taskCRD, &api.MiniDBTask{}, mgr.GetScheme(), opts)
	if err != nil {
		return err
	}
	if err := crt.InstallCRD(ctx, mgr.GetClient(), mgr.GetAPIReader(), crd); err != nil {
		return err
	}
	_, err = crt.NewTaskController(mgr, &api.MiniDBTask{}, opstask.Config{Handlers: []opstask.Handler{{
		Name: "reindex",
		Executor: opstask.ExecutorFunc(func(ctx context.Context, r *opstask.Run) error {
			return r.Progress(ctx, "reindexed") // the made-up database reindexes at once
		}),
		Resumable: true,
	}}}, opts)
	return err
}
