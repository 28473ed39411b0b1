package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/groundskeeper-io/groundskeeper/examples/fdb-lock/api"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/kubecmd"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/rbactest"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/replicatest"
	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// recorder is the database the controllers act on in these tests: it notes
// every global operation, and every one that started while another was
// still running.
type recorder struct {
	duration time.Duration
	// onStart, if set, is called as an operation starts.
	onStart func(instance, operation string)

	mu       sync.Mutex
	active   []string // instances acting now
	overlaps []string
	ops      []op // in order of completion
}

type op struct {
	instance, operation string
	start               time.Time
}

func (r *recorder) Act(ctx context.Context, instance, operation string) error {
	r.mu.Lock()
	if len(r.active) > 0 {
		r.overlaps = append(r.overlaps, fmt.Sprintf("%s started %q while %v acted", instance, operation, r.active))
	}
	r.active = append(r.active, instance)
	start, onStart := time.Now(), r.onStart
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		i := slices.Index(r.active, instance)
		r.active = slices.Delete(r.active, i, i+1)
		if ctx.Err() != nil {
			operation += " (interrupted)"
		}
		r.ops = append(r.ops, op{instance, operation, start})
	}()
	if onStart != nil {
		onStart(instance, operation)
	}
	t := time.NewTimer(r.duration)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *recorder) setOnStart(f func(instance, operation string)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.onStart = f
}

func (r *recorder) results() (overlaps []string, ops []op) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.overlaps), slices.Clone(r.ops)
}

// Three real controllers (dc1, dc2, and dc3, which the spec denies) on one
// real API server reconcile one Database through three versions, taking the
// lock in a ConfigMap or in etcd; then dc1 is stopped in the middle of a
// bounce, holding the lock, and the spec moves on to a fourth version. The
// global operations must never overlap, dc3 must never act, dc1 and dc2
// must both finish, and after dc1 stopped dc2 must not act before dc1's
// lock expired.
func TestInstancesTakeTurns(t *testing.T) {
	for _, backend := range []string{"kubernetes", "etcd"} {
		t.Run(backend, func(t *testing.T) {
			// The two backends' runs are isolated: each has its own
			// namespace (its Database, ConfigMap lock and Leases) on the
			// shared API server, and the etcd one its own key prefix in
			// the shared etcd; their loggers are the test's, and neither
			// restarts a shared component.
			t.Parallel()
			k := testenv.StartKubernetes(t)
			client := installCRD(t, k.Config)
			opts := controllerOptions{
				lockURL:      "configmap://" + k.Namespace + "/fdb-lock-global",
				lockDuration: 3 * time.Second,
				deniedRetry:  time.Second,
			}
			if backend == "etcd" {
				e := testenv.StartEtcd(t)
				opts.lockURL = etcdURL(e.Endpoints, e.Prefix)
			}
			createDatabase(t, client, k.Namespace, DatabaseSpec{
				Version:           "v1",
				Coordinators:      5,
				ExcludedProcesses: []string{"dc1-storage-3"},
				LockOptions:       LockOptions{DenyList: []DenyListEntry{{ID: "dc3"}}},
			})
			rec := &recorder{duration: time.Second}
			var requests rbactest.Recorder
			inst := map[string]replicas{}
			for _, id := range []string{"dc1", "dc2", "dc3"} {
				inst[id] = startInstance(t, requests.Wrap(k.Config), k.Namespace, opts, id, rec)
			}
			b, closer, err := openBackend(context.Background(), opts, k.Config)
			if err != nil {
				t.Fatal(err)
			}
			defer closer.Close()
			observer, err := locking.New(locking.Config{Backend: b, LockID: "observer"})
			if err != nil {
				t.Fatal(err)
			}

			for i, version := range []string{"v1", "v2", "v3"} {
				if i > 0 {
					setSpec(t, client, k.Namespace, func(s *DatabaseSpec) { s.Version = version })
				}
				waitFor(t, client, k.Namespace, 60*time.Second, func(d *Database) bool {
					return d.Status.RunningVersions["dc1"] == version && d.Status.RunningVersions["dc2"] == version
				})
			}

			// dc1 dies in the middle of its next bounce; its lock stays.
			type kill struct {
				at   time.Time
				lock locking.Record
			}
			killed := make(chan kill, 1)
			rec.setOnStart(func(instance, operation string) {
				if instance != "dc1" || !strings.HasSuffix(operation, "to v4") {
					return
				}
				held, ok, err := observer.Holder(context.Background())
				if err != nil || !ok || held.Holder != "dc1" {
					t.Errorf("dc1 acts, but the lock record is %+v, %v, %v", held, ok, err)
				}
				inst["dc1"].stop() // both replicas: the data centre's instance is gone
				killed <- kill{time.Now(), held}
			})
			setSpec(t, client, k.Namespace, func(s *DatabaseSpec) { s.Version = "v4" })
			var dead kill
			select {
			case dead = <-killed:
			case <-time.After(60 * time.Second):
				t.Fatal("dc1 did not start bouncing to v4")
			}
			// dc2's leader stops too, while it waits for dc1's lock: its
			// other replica takes over.
			inst["dc2"].stopLeader(t)
			setSpec(t, client, k.Namespace, func(s *DatabaseSpec) { s.Version = "v5" })
			waitFor(t, client, k.Namespace, 60*time.Second, func(d *Database) bool {
				return d.Status.RunningVersions["dc2"] == "v5"
			})

			db := getDatabase(t, client, k.Namespace)
			if db.Status.Coordinators != 5 || !slices.Equal(db.Status.ExcludedProcesses, []string{"dc1-storage-3"}) {
				t.Errorf("status %+v: want 5 coordinators and dc1-storage-3 excluded", db.Status)
			}
			if v, ok := db.Status.RunningVersions["dc3"]; ok {
				t.Errorf("denied dc3 bounced its processes to %s", v)
			}
			overlaps, ops := rec.results()
			var lines []string
			for _, o := range ops {
				lines = append(lines, fmt.Sprintf("%s %s: %s", o.start.Format("15:04:05.000"), o.instance, o.operation))
			}
			t.Logf("global operations, by end:\n%s", strings.Join(lines, "\n"))
			t.Logf("dc1 stopped at %s holding the lock until %s", dead.at.Format("15:04:05.000"), clockTime(dead.lock.End))
			if len(overlaps) > 0 {
				t.Errorf("global operations overlapped:\n%s", strings.Join(overlaps, "\n"))
			}
			acted := map[string]int{}
			afterKill := 0
			for _, o := range ops {
				acted[o.instance]++
				if o.instance == "dc2" && o.start.After(dead.at) {
					afterKill++
					// The end second is still live: the lock expires a second later.
					if expiry := dead.lock.End.Add(time.Second); o.start.Before(expiry) {
						t.Errorf("dc2 started %q at %s, before dc1's lock expired at %s", o.operation, o.start.Format("15:04:05.000"), clockTime(expiry))
					}
				}
			}
			if afterKill == 0 {
				t.Errorf("dc2 did not act after dc1 stopped")
			}
			if acted["dc3"] > 0 {
				t.Errorf("denied dc3 acted %d times", acted["dc3"])
			}
			if acted["dc1"] < 3 || acted["dc2"] < 3 {
				t.Errorf("operations by instance %v: want at least the three bounces of dc1 and of dc2", acted)
			}

			// dc3 was kept out by the deny list in the lock backend, which
			// the instances wrote from the spec.
			if ids, err := observer.DenyList(context.Background()); err != nil || !slices.Equal(ids, []string{"dc3"}) {
				t.Errorf("deny list in the backend = %v, %v; want [dc3]", ids, err)
			}

			// deploy/rbac.yaml, written for a configmap:// --lock-url,
			// grants exactly what the controllers asked for.
			if backend == "kubernetes" {
				rules := rbactest.Rules(t, "deploy/rbac.yaml", map[string]string{"fdb-lock": k.Namespace})
				// Each instance's Role names its own Lease; the file is dc1's.
				reqs := requests.Requests()
				for i, r := range reqs {
					if r.Resource == "leases" && strings.HasPrefix(r.Name, "fdb-lock-dc") {
						reqs[i].Name = "fdb-lock-dc1"
					}
				}
				rbactest.Check(t, rules, reqs, nil)
			}
		})
	}
}

// The check above can fail: with spec.lockOptions.disableLocks, the same
// controllers do overlap.
func TestDisabledLocksOverlap(t *testing.T) {
	k := testenv.StartKubernetes(t)
	client := installCRD(t, k.Config)
	opts := controllerOptions{
		lockURL:      "configmap://" + k.Namespace + "/fdb-lock-global",
		lockDuration: 3 * time.Second,
		deniedRetry:  time.Second,
	}
	createDatabase(t, client, k.Namespace, DatabaseSpec{
		Version:     "v1",
		LockOptions: LockOptions{DisableLocks: true},
	})
	// Bounces of 5 s: the two instances' start may be a second or two
	// apart on a loaded machine, and their bounces must still meet.
	rec := &recorder{duration: 5 * time.Second}
	startInstance(t, k.Config, k.Namespace, opts, "dc1", rec)
	startInstance(t, k.Config, k.Namespace, opts, "dc2", rec)
	waitFor(t, client, k.Namespace, 2*time.Minute, func(d *Database) bool {
		return d.Status.RunningVersions["dc1"] == "v1" && d.Status.RunningVersions["dc2"] == "v1"
	})
	if overlaps, ops := rec.results(); len(overlaps) == 0 {
		t.Errorf("no overlap recorded with locks disabled; operations: %+v", ops)
	}
}

// installCRD creates deploy/crd.yaml (once per control plane), waits
// until Databases are served, and returns a client that reads and writes
// them typed.
func installCRD(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	f, err := os.Open("deploy/crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var crd unstructured.Unstructured
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&crd.Object); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := newClient(t, cfg).Create(ctx, &crd); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		// A new client each time: a client's REST mapper may remember
		// that the kind was not served.
		c := newClient(t, cfg)
		err := c.List(ctx, &api.DatabaseList{}, client.InNamespace("default"))
		if err == nil {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("databases not served: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := api.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func createDatabase(t *testing.T, c client.Client, namespace string, spec DatabaseSpec) {
	t.Helper()
	if err := c.Create(context.Background(), &Database{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "orders"}, Spec: spec}); err != nil {
		t.Fatal(err)
	}
}

func getDatabase(t *testing.T, c client.Client, namespace string) *Database {
	t.Helper()
	var db Database
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: "orders"}, &db); err != nil {
		t.Fatal(err)
	}
	return &db
}

func setSpec(t *testing.T, c client.Client, namespace string, change func(*DatabaseSpec)) {
	t.Helper()
	for {
		db := getDatabase(t, c, namespace)
		change(&db.Spec)
		err := c.Update(context.Background(), db)
		if !apierrors.IsConflict(err) {
			if err != nil {
				t.Fatal(err)
			}
			return
		}
	}
}

func waitFor(t *testing.T, c client.Client, namespace string, timeout time.Duration, done func(*Database) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		db := getDatabase(t, c, namespace)
		if done(db) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s; status %+v", timeout, db.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// replica is one replica of an instance: its manager and how to stop it.
type replica struct {
	name string
	mgr  manager.Manager
	stop context.CancelFunc
	done chan error
}

type replicas []*replica

// startInstance runs instance id as the Deployment in deploy/ does: two
// replicas, each its own manager and lock backend client as separate
// processes would have, with leader election on the Lease fdb-lock-<id>,
// until the test ends or stop is called.
func startInstance(t *testing.T, cfg *rest.Config, namespace string, o controllerOptions, id string, act actor) replicas {
	t.Helper()
	o.lockID = id
	common := kubecmd.Flags{Namespace: namespace, LeaderElect: true}
	var out replicas
	for i := range 2 {
		name := fmt.Sprintf("%s-%d", id, i)
		log := replicatest.Logger(t).WithName(name)
		ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), log))
		backend, closer, err := openBackend(ctx, o, cfg)
		if err != nil {
			t.Fatal(err)
		}
		mgr, err := newManager(rest.CopyConfig(cfg), &common, o, backend, act, replicatest.Options(log))
		if err != nil {
			t.Fatal(err)
		}
		r := &replica{name: name, mgr: mgr, stop: cancel, done: make(chan error, 1)}
		go func() {
			defer closer.Close()
			r.done <- mgr.Start(ctx)
		}()
		out = append(out, r)
	}
	t.Cleanup(func() {
		for _, r := range out {
			r.stop()
			if err := <-r.done; err != nil {
				t.Errorf("%s: %v", r.name, err)
			}
		}
	})
	return out
}

// stop stops every replica of the instance.
func (rs replicas) stop() {
	for _, r := range rs {
		r.stop()
	}
}

// leader waits until one replica leads, and returns it.
func (rs replicas) leader(t *testing.T) *replica {
	t.Helper()
	mgrs := make([]manager.Manager, len(rs))
	for i, r := range rs {
		mgrs[i] = r.mgr
	}
	return rs[replicatest.Leader(t, mgrs...)]
}

// stopLeader stops the leading replica (it releases the Lease as it stops,
// as on a rolling update) and waits until another one leads.
func (rs replicas) stopLeader(t *testing.T) {
	t.Helper()
	old := rs.leader(t)
	start := time.Now()
	old.stop()
	var rest replicas
	for _, r := range rs {
		if r != old {
			rest = append(rest, r)
		}
	}
	next := rest.leader(t)
	t.Logf("%s stopped; %s leads %s later", old.name, next.name, time.Since(start).Round(10*time.Millisecond))
}

// The command itself, flags and all, with leader election, against the test
// API server's kubeconfig; stopped with SIGINT as a pod is with SIGTERM.
func TestRunWithKubeconfig(t *testing.T) {
	k := testenv.StartKubernetes(t)
	client := installCRD(t, k.Config)
	createDatabase(t, client, k.Namespace, DatabaseSpec{Version: "v1", Coordinators: 3})
	// The command reaches the API server through a kubeconfig that records
	// its requests, for the RBAC check.
	var requests rbactest.Recorder
	kubeconfig := requests.Kubeconfig(t, k.Config)
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"--kubeconfig", kubeconfig, "--namespace", k.Namespace, "--lock-id", "dc1",
			"--action-duration", "10ms", "--zap-log-level", "1", "--leader-elect",
			"--health-probe-bind-address", "0"})
	}()
	waitFor(t, client, k.Namespace, 60*time.Second, func(d *Database) bool {
		return d.Status.RunningVersions["dc1"] == "v1" && d.Status.Coordinators == 3
	})
	if _, err := k.Client.CoordinationV1().Leases(k.Namespace).Get(context.Background(), "fdb-lock-dc1", metav1.GetOptions{}); err != nil {
		t.Errorf("leader election Lease: %v", err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("did not stop after SIGINT")
	}

	// deploy/rbac.yaml grants exactly what the command asked for, from its
	// start to its stop (which releases the Lease).
	rules := rbactest.Rules(t, "deploy/rbac.yaml", map[string]string{"fdb-lock": k.Namespace})
	rbactest.Check(t, rules, requests.Requests(), nil)
}

// etcdURL is the --lock-url of an etcd lock on endpoints (http:// URLs),
// under prefix.
func etcdURL(endpoints []string, prefix string) string {
	hosts := make([]string, len(endpoints))
	for i, ep := range endpoints {
		hosts[i] = strings.TrimPrefix(ep, "http://")
	}
	return "etcd://" + strings.Join(hosts, ",") + prefix
}
