package main

import (
	"context"
	"hash/fnv"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/groundskeeper-io/groundskeeper/examples/internal/chaos"
	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/testenv"
	"github.com/groundskeeper-io/groundskeeper/testenv/faultproxy"
)

// shortSeed is the seed of the short run; CHAOS_SEED replays another.
const shortSeed = 14

// TestChaos runs the etcd-opstask workload on a control plane and a MinIO
// of its own while their components restart, the replicas' connections
// (to the API server, to MinIO, to the targets' etcd) fail and replicas
// are killed, then checks the invariants (see chaos_check_test.go). The
// targets are the control plane's own etcd, so its restarts are also
// restarts of the targets. Without CHAOS_DURATION it is the short run, 60 s
// of faults from a fixed seed, which make test runs; make chaos sets
// CHAOS_DURATION.
func TestChaos(t *testing.T) {
	seed, duration := chaos.Plan(t, shortSeed)

	k := testenv.StartIsolatedKubernetes(t)
	installCRD(t, k.Config)
	s3 := testenv.StartIsolatedS3(t, testenv.BucketOptions{})
	minio := faultproxy.Start(t, strings.TrimPrefix(s3.Endpoint, "http://"))
	etcd := faultproxy.Start(t, strings.TrimPrefix(k.EtcdEndpoint, "http://"))
	replicaProxies, replicaConfig := chaos.ReplicaProxies(t, k, 2)
	world := opsWorld{
		direct: k.Config, ns: k.Namespace, etcd: "http://" + etcd.Addr(),
		bucket: s3.Bucket, endpoint: "http://" + minio.Addr(),
		replicaConfig: replicaConfig,
	}
	log, logPath, err := chaos.FileLogger(t, "etcd-opstask", seed)
	if err != nil {
		t.Fatal(err)
	}
	// client-go's own goroutines log through klog after the test returns:
	// the logger is set for the rest of the process, never cleared.
	klog.SetLogger(log.WithName("klog"))
	ctrllog.SetLogger(log)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The bound: a replica killed just before the faults stop holds its
	// task for opstask's lease (30 s) before the other takes it over;
	// then that task and the two queued behind it run (settle, health
	// checks, up to 3 s of planned work and a snapshot each), and the
	// longest TTL (12 s) and a cleanup follow. Rounded up for a loaded
	// machine.
	g, err := newOpsWorkload(ctx, world, opsOptions{bound: 80 * time.Second, log: log}, seed)
	if err != nil {
		t.Fatal(err)
	}
	// A client's connections: to the API server for each replica, and to
	// MinIO and etcd (shared by both replicas).
	clients := []*faultproxy.Proxy{replicaProxies[0], replicaProxies[1], minio, etcd}
	all := append(clients[:4:4], k.EtcdProxy)
	faults := append(chaos.ControlPlaneFaults(k), chaos.Restart("restart minio", s3.Server), chaos.KillReplica(g.replicas))
	faults = append(faults, chaos.ConnectionFaults(clients, all)...)
	res := runOps(ctx, t, g, chaos.Config{
		Name: "etcd-opstask", Seed: seed, Duration: duration, Faults: faults,
		Schedule:      &chaos.ScheduleOptions{MinGap: 2 * time.Second, MaxGap: 6 * time.Second, MinHold: time.Second, MaxHold: 12 * time.Second},
		SettleTimeout: 90 * time.Second,
	})
	chaos.Report(t, res, logPath)
	if res.Ops["observed: executions"] == 0 || res.Ops["observed: cleanups"] == 0 || res.Ops["observed: tasks deleted after their TTL"] == 0 {
		t.Errorf("no task was executed, cleaned up or deleted: the run proves nothing\n%s", res.Table())
	}
}

// runOps runs the workload g under cfg's faults with its replicas, which
// keep running while the system settles and stop when the run is over.
func runOps(ctx context.Context, t *testing.T, g *opsWorkload, cfg chaos.Config) *chaos.Result {
	cfg.Replicas, cfg.Workload, cfg.Settled, cfg.Check = g.replicas, g.generate, g.settled, g.check
	cfg.Observed, cfg.Logf = func(ops map[string]int) { g.observed(ctx, ops) }, t.Logf
	return chaos.Run(ctx, cfg)
}

// The planted bugs: test-only wrappers of a replica's store, each breaking
// one promise of opstask the way a bug in it would.

// stealExecutions lets a replica run a task another replica has claimed:
// its List shows the others' InProgress tasks as Pending, so it claims
// them again (its write carries the current resourceVersion and succeeds).
type stealExecutions struct {
	watchStore
	identity string
}

func (s stealExecutions) List(ctx context.Context) ([]*opstask.Task, error) {
	tasks, err := s.watchStore.List(ctx)
	for _, t := range tasks {
		if lo := t.Status.LastOperation; t.State() == opstask.TaskStateInProgress && lo != nil && !strings.HasPrefix(lo.RunID, s.identity+"-") {
			t.Status = opstask.Status{}
		}
	}
	return tasks, err
}

// stealCleanups lets a replica clean up a task whose cleanup another
// replica has claimed: its List shows the others' cleanups as completed.
type stealCleanups struct {
	watchStore
	identity string
}

func (s stealCleanups) List(ctx context.Context) ([]*opstask.Task, error) {
	tasks, err := s.watchStore.List(ctx)
	for _, t := range tasks {
		if lo := t.Status.LastOperation; lo != nil && lo.Type == opstask.LastOperationTypeCleanup && lo.State == opstask.LastOperationStateInProgress && !strings.HasPrefix(lo.RunID, s.identity+"-") {
			lo.State = opstask.LastOperationStateCompleted
		}
	}
	return tasks, err
}

// reverseQueues reverses every queue: its List shows later tasks as
// created earlier (and long ago, so that they need not settle).
type reverseQueues struct{ watchStore }

func (s reverseQueues) List(ctx context.Context) ([]*opstask.Task, error) {
	tasks, err := s.watchStore.List(ctx)
	for _, t := range tasks {
		t.CreationTimestamp = time.Unix(-t.CreationTimestamp.Unix(), 0)
	}
	return tasks, err
}

// dropTasks deletes about a third of the pending tasks it lists (by a
// hash of their names), as a controller that took them for expired would.
type dropTasks struct{ watchStore }

func (s dropTasks) List(ctx context.Context) ([]*opstask.Task, error) {
	tasks, err := s.watchStore.List(ctx)
	var kept []*opstask.Task
	for _, t := range tasks {
		h := fnv.New32a()
		h.Write([]byte(t.Name))
		if t.State() == opstask.TaskStatePending && h.Sum32()%3 == 0 && s.Delete(ctx, t) == nil {
			continue
		}
		kept = append(kept, t)
	}
	return kept, err
}

// hideTarget hides the tasks of one target: they never run.
type hideTarget struct {
	watchStore
	target string
}

func (s hideTarget) List(ctx context.Context) ([]*opstask.Task, error) {
	tasks, err := s.watchStore.List(ctx)
	var kept []*opstask.Task
	for _, t := range tasks {
		if t.Spec.Target != s.target {
			kept = append(kept, t)
		}
	}
	return kept, err
}

// Each invariant catches a planted bug: the workload runs without faults
// on the shared control plane, with both replicas' stores broken by a
// test-only wrapper, and the checker must report the invariant. The kinds'
// real executors are skipped (planned work only): these runs test the
// checker.
func TestChaosCheckerCatchesPlantedBugs(t *testing.T) {
	// The subtests run in parallel: controller-runtime's root logger, the
	// process's, is set once, before them.
	rootLog, rootLogPath, err := chaos.FileLogger(t, "etcd-opstask-planted", shortSeed)
	if err != nil {
		t.Fatal(err)
	}
	ctrllog.SetLogger(rootLog)
	t.Logf("controller-runtime's log: %s", rootLogPath)
	for _, tc := range []struct {
		name    string
		planted func(identity string, s watchStore) watchStore
		want    []string
	}{
		{"a second replica runs a claimed task", func(id string, s watchStore) watchStore { return stealExecutions{s, id} }, []string{invExclusive}},
		{"a second replica runs a claimed cleanup", func(id string, s watchStore) watchStore { return stealCleanups{s, id} }, []string{invCleanup}},
		{"queues run newest first", func(_ string, s watchStore) watchStore { return reverseQueues{s} }, []string{invFIFO}},
		{"pending tasks deleted", func(_ string, s watchStore) watchStore { return dropTasks{s} }, []string{invKept}},
		{"a target's tasks never run", func(_ string, s watchStore) watchStore { return hideTarget{s, opsTargets[0]} }, []string{invLiveness}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			k := testenv.StartKubernetes(t)
			installCRD(t, k.Config)
			s3 := testenv.S3(t)
			world := opsWorld{
				direct: k.Config, ns: k.Namespace, etcd: strings.Join(testenv.StartEtcd(t).Endpoints, ","),
				bucket: s3.Bucket, endpoint: s3.Endpoint,
				replicaConfig: func(int) (*rest.Config, *faultproxy.Proxy) { return k.Config, nil },
			}
			log, logPath, err := chaos.FileLogger(t, "etcd-opstask", shortSeed)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			g, err := newOpsWorkload(ctx, world, opsOptions{bound: 10 * time.Second, ttl: [2]int32{2, 4}, plannedOnly: true, planted: tc.planted, log: log}, shortSeed)
			if err != nil {
				t.Fatal(err)
			}
			res := runOps(ctx, t, g, chaos.Config{Name: "etcd-opstask planted: " + tc.name, Seed: shortSeed,
				Duration: 15 * time.Second, SettleTimeout: 12 * time.Second})
			t.Logf("replica log: %s\n%s", logPath, res.Table())
			found := map[string]int{}
			for _, v := range res.Violations {
				found[v.Invariant]++
			}
			for _, inv := range tc.want {
				if found[inv] == 0 {
					t.Errorf("the checker did not report %q for the planted bug %q; it reported %v", inv, tc.name, found)
				}
			}
		})
	}
}
