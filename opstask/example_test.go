package opstask_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/memstore"
)

// An operator registers its task kinds and runs the controller; tasks of one
// target run one at a time in creation order, duplicates and tasks whose
// preconditions fail are rejected.
func Example() {
	store := memstore.New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	snapshot := opstask.Handler{
		Name: "onDemandSnapshot",
		Executor: opstask.ExecutorFunc(func(ctx context.Context, run *opstask.Run) error {
			var cfg struct{ Type string }
			_, raw, _ := run.Task.Spec.Member()
			if err := json.Unmarshal(raw, &cfg); err != nil {
				return err
			}
			fmt.Printf("taking a %s snapshot of %s\n", cfg.Type, run.Task.Spec.Target)
			return run.Progress(ctx, "snapshot uploaded")
		}),
		// Two pending snapshots of the same type for the same etcd are one
		// too many.
		DuplicateKey: func(t *opstask.Task) (string, error) {
			var cfg struct{ Type string }
			_, raw, _ := t.Spec.Member()
			err := json.Unmarshal(raw, &cfg)
			return cfg.Type, err
		},
	}
	recovery := opstask.Handler{
		Name: "recoverFromQuorumLoss",
		Executor: opstask.ExecutorFunc(func(ctx context.Context, run *opstask.Run) error {
			fmt.Println("recovering", run.Task.Spec.Target)
			return nil
		}),
		Preconditions: []opstask.Precondition{opstask.PreconditionFunc(func(ctx context.Context, t *opstask.Task) error {
			// A real precondition reads the target's state.
			return opstask.Unmet("QuorumPresent", t.Spec.Target+" has quorum")
		})},
	}
	c, err := opstask.New(opstask.Config{Store: store, Handlers: []opstask.Handler{snapshot, recovery}, Settle: opstask.NoSettle})
	if err != nil {
		panic(err)
	}

	for _, t := range []struct{ name, kind, config string }{
		{"1-full", "onDemandSnapshot", `{"type":"full"}`},
		{"2-delta", "onDemandSnapshot", `{"type":"delta"}`},
		{"3-full-again", "onDemandSnapshot", `{"type":"full"}`},
		{"4-recover", "recoverFromQuorumLoss", `{}`},
	} {
		_, err := store.Create(ctx, &opstask.Task{Namespace: "shoot--dev", Name: t.name, Spec: opstask.Spec{
			Config: map[string]json.RawMessage{t.kind: json.RawMessage(t.config)},
			Target: "etcd-main",
		}})
		if err != nil {
			panic(err)
		}
	}

	go c.Run(ctx)
	for {
		tasks, _ := store.List(ctx)
		finished := 0
		for _, t := range tasks {
			if t.State().Finished() {
				finished++
			}
		}
		if finished == len(tasks) {
			sort.Slice(tasks, func(i, j int) bool { return tasks[i].Name < tasks[j].Name })
			for _, t := range tasks {
				fmt.Printf("%s: %s, last operation %s %s", t.Name, t.State(), t.Status.LastOperation.Type, t.Status.LastOperation.State)
				for _, e := range t.Status.LastErrors {
					fmt.Printf(" (%s: %s)", e.Code, e.Description)
				}
				fmt.Println()
			}
			return
		}
		time.Sleep(time.Millisecond)
	}
	// Output:
	// taking a full snapshot of etcd-main
	// taking a delta snapshot of etcd-main
	// 1-full: Succeeded, last operation Execution Completed
	// 2-delta: Succeeded, last operation Execution Completed
	// 3-full-again: Rejected, last operation Admit Failed (DuplicateTask: duplicate of unfinished task 1-full (kind onDemandSnapshot) for the same target)
	// 4-recover: Rejected, last operation Admit Failed (QuorumPresent: opstask: precondition not met: etcd-main has quorum)
}

// The state machine allows only DEP-05's transitions and records each one in
// lastOperation.
func ExampleStatus_Transition() {
	var s opstask.Status
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	fmt.Println(s.Transition(opstask.TaskStateSucceeded, now, "run-1", ""))
	_ = s.Transition(opstask.TaskStateInProgress, now, "run-1", "started")
	fmt.Println(s.State, s.LastOperation.Type, s.LastOperation.State, s.StartedAt.UTC().Format(time.RFC3339))
	_ = s.Transition(opstask.TaskStateSucceeded, now.Add(time.Minute), "run-1", "done")
	fmt.Println(s.State, s.LastOperation.Type, s.LastOperation.State, s.LastTransitionTime.UTC().Format(time.RFC3339))
	// Output:
	// opstask: illegal task state transition: Pending → Succeeded (allowed: Pending → InProgress|Rejected, InProgress → Succeeded|Failed)
	// InProgress Execution InProgress 2026-11-22T10:00:00Z
	// Succeeded Execution Completed 2026-11-22T10:01:00Z
}
