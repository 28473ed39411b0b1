package subreconcile_test

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

// Cluster is a small custom resource: a database cluster with a number of
// processes. The DeepCopy methods are what controller-gen would generate.
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ClusterSpec   `json:"spec,omitempty"`
	Status            ClusterStatus `json:"status,omitempty"`
}

type ClusterSpec struct {
	Processes int `json:"processes"`
}

type ClusterStatus struct {
	Processes   int                      `json:"processes,omitempty"`
	HasConfig   bool                     `json:"hasConfig,omitempty"`
	Generations subreconcile.Generations `json:"generations,omitempty"`
}

func (in *Cluster) DeepCopy() *Cluster {
	out := *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	return &out
}

func (in *Cluster) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// dbStatus is the per-loop state: what the database reports, fetched once
// per loop and shared by every step.
type dbStatus struct {
	runningProcesses int
}

// Example builds a three-step chain for a Cluster and runs two loops: the
// first finds processes missing and asks to be requeued, the second finds
// the cluster converged and marks the generation reconciled.
func Example() {
	running := 1 // what the "database" reports

	steps := []subreconcile.Named[*Cluster, *dbStatus]{
		subreconcile.NamedFunc("UpdateConfigMap", func(_ context.Context, c *Cluster, loop subreconcile.Loop[*dbStatus]) *subreconcile.Requeue {
			if c.Status.HasConfig {
				return nil
			}
			c.Status.HasConfig = true // a real step would create the ConfigMap here
			loop.Acted("created config map " + c.Name + "-config")
			return nil
		}),
		subreconcile.NamedFunc("AddProcesses", func(_ context.Context, c *Cluster, loop subreconcile.Loop[*dbStatus]) *subreconcile.Requeue {
			if missing := c.Spec.Processes - loop.State().runningProcesses; missing > 0 {
				// Let UpdateStatus run, then come back.
				return subreconcile.DelayedRequeueAfter(15*time.Second, fmt.Sprintf("waiting for %d processes", missing))
			}
			return nil
		}),
		subreconcile.NamedFunc("UpdateStatus", func(_ context.Context, c *Cluster, loop subreconcile.Loop[*dbStatus]) *subreconcile.Requeue {
			c.Status.Processes = loop.State().runningProcesses
			if c.Status.Processes == c.Spec.Processes {
				c.Status.Generations.MarkReconciled(loop.Generation())
			}
			return nil
		}),
	}

	runner, err := subreconcile.New(subreconcile.Config[*Cluster, *dbStatus]{
		Name:  "Cluster",
		Steps: steps,
		NewState: func(context.Context, *Cluster) (*dbStatus, error) {
			return &dbStatus{runningProcesses: running}, nil
		},
		Generations: func(c *Cluster) *subreconcile.Generations { return &c.Status.Generations },
		Recorder: subreconcile.EventFunc(func(_ runtime.Object, eventtype, reason, message string) {
			fmt.Printf("  event: %s %s %q\n", eventtype, reason, message)
		}),
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	cluster := &Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "orders", Namespace: "shop", Generation: 1},
		Spec:       ClusterSpec{Processes: 3},
	}
	for loop := 1; loop <= 2; loop++ {
		fmt.Printf("loop %d:\n", loop)
		out := runner.Run(context.Background(), cluster)
		for _, a := range out.Acted {
			fmt.Printf("  %s acted: actions %q, requeue %v\n", a.Name, a.Actions, a.Requeue != nil)
		}
		after, err := out.Result() // reconcile.Result{RequeueAfter: after}, err
		fmt.Printf("  requeue after %v, error %v, messages %q, reconciled %v\n", after, err, out.Messages, out.Reconciled)

		running = 3 // the processes come up
	}
	fmt.Printf("status: %d processes, generations %v\n", cluster.Status.Processes, cluster.Status.Generations)

	// Output:
	// loop 1:
	//   UpdateConfigMap acted: actions ["created config map orders-config"], requeue false
	//   AddProcesses acted: actions [], requeue true
	//   requeue after 15s, error <nil>, messages ["waiting for 2 processes"], reconciled false
	// loop 2:
	//   event: Normal ReconciliationComplete "Reconciled generation 1"
	//   requeue after 0s, error <nil>, messages [], reconciled true
	// status: 3 processes, generations reconciled=1
}
