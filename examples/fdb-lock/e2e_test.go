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
	"github.com/go-logr/logr/testr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/groundskeeper-io/groundskeeper/examples/internal/rbactest"
	"github.com/groundskeeper-io/groundskeeper/internal/testenv"
	"github.com/groundskeeper-io/groundskeeper/locking"
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
			k := testenv.StartKubernetes(t)
			client := installCRD(t, k.Config)
			opts := controllerOptions{
				namespace:     k.Namespace,
				lockBackend:   backend,
				lockConfigMap: "fdb-lock-global",
				lockDuration:  3 * time.Second,
				deniedRetry:   time.Second,
			}
			if backend == "etcd" {
				e := testenv.StartEtcd(t)
				opts.etcdEndpoints, opts.etcdPrefix = strings.Join(e.Endpoints, ","), e.Prefix
			}
			createDatabase(t, client, k.Namespace, DatabaseSpec{
				Version:           "v1",
				Coordinators:      5,
				ExcludedProcesses: []string{"dc1-storage-3"},
				LockOptions:       LockOptions{DenyList: []DenyListEntry{{ID: "dc3"}}},
			})
			rec := &recorder{duration: time.Second}
			var requests rbactest.Recorder
			stop := map[string]func(){}
			for _, id := range []string{"dc1", "dc2", "dc3"} {
				stop[id] = startController(t, requests.Wrap(k.Config), opts, id, rec)
			}
			b, closer, err := backends[backend](context.Background(), opts, k.Config)
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
				stop["dc1"]()
				killed <- kill{time.Now(), held}
			})
			setSpec(t, client, k.Namespace, func(s *DatabaseSpec) { s.Version = "v4" })
			var dead kill
			select {
			case dead = <-killed:
			case <-time.After(60 * time.Second):
				t.Fatal("dc1 did not start bouncing to v4")
			}
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

			// deploy/rbac.yaml, written for --lock-backend=kubernetes,
			// grants exactly what the controllers asked for.
			if backend == "kubernetes" {
				rules := rbactest.Rules(t, "deploy/rbac.yaml", map[string]string{"fdb-lock": k.Namespace})
				rbactest.Check(t, rules, requests.Requests(), map[string]string{
					"get leases.coordination.k8s.io":    "--leader-elect (TestRunWithKubeconfig)",
					"update leases.coordination.k8s.io": "--leader-elect (TestRunWithKubeconfig)",
					"create leases.coordination.k8s.io": "--leader-elect (TestRunWithKubeconfig)",
				})
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
		namespace:     k.Namespace,
		lockBackend:   "kubernetes",
		lockConfigMap: "fdb-lock-global",
		lockDuration:  3 * time.Second,
		deniedRetry:   time.Second,
	}
	createDatabase(t, client, k.Namespace, DatabaseSpec{
		Version:     "v1",
		LockOptions: LockOptions{DisableLocks: true},
	})
	rec := &recorder{duration: time.Second}
	startController(t, k.Config, opts, "dc1", rec)
	startController(t, k.Config, opts, "dc2", rec)
	waitFor(t, client, k.Namespace, 60*time.Second, func(d *Database) bool {
		return d.Status.RunningVersions["dc1"] == "v1" && d.Status.RunningVersions["dc2"] == "v1"
	})
	if overlaps, ops := rec.results(); len(overlaps) == 0 {
		t.Errorf("no overlap recorded with locks disabled; operations: %+v", ops)
	}
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// installCRD creates deploy/crd.yaml (once per control plane) and waits
// until Databases are served.
func installCRD(t *testing.T, cfg *rest.Config) dynamic.Interface {
	t.Helper()
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
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
	if _, err := client.Resource(crdGVR).Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := client.Resource(databaseGVR).Namespace("default").List(ctx, metav1.ListOptions{})
		if err == nil {
			return client
		}
		if time.Now().After(deadline) {
			t.Fatalf("databases not served: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func createDatabase(t *testing.T, client dynamic.Interface, namespace string, spec DatabaseSpec) {
	t.Helper()
	u, err := toUnstructured(&Database{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "orders"}, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Resource(databaseGVR).Namespace(namespace).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func getDatabase(t *testing.T, client dynamic.Interface, namespace string) *Database {
	t.Helper()
	db, err := dynamicDatabases{client}.Get(context.Background(), namespace, "orders")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func setSpec(t *testing.T, client dynamic.Interface, namespace string, change func(*DatabaseSpec)) {
	t.Helper()
	for {
		db := getDatabase(t, client, namespace)
		change(&db.Spec)
		u, err := toUnstructured(db)
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.Resource(databaseGVR).Namespace(namespace).Update(context.Background(), u, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			if err != nil {
				t.Fatal(err)
			}
			return
		}
	}
}

func waitFor(t *testing.T, client dynamic.Interface, namespace string, timeout time.Duration, done func(*Database) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		db := getDatabase(t, client, namespace)
		if done(db) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s; status %+v", timeout, db.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startController runs one instance until the test ends, or until the
// returned function stops it, with its own clients and lock backend, as a
// separate process would.
func startController(t *testing.T, cfg *rest.Config, o controllerOptions, id string, act actor) (stop func()) {
	t.Helper()
	o.lockID = id
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), testr.NewWithOptions(t, testr.Options{LogTimestamp: true})))
	done := make(chan error, 1)
	go func() { done <- runController(ctx, rest.CopyConfig(cfg), o, act) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller %s: %v", id, err)
		}
	})
	return cancel
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
			"--lock-backend", "kubernetes", "--action-duration", "10ms", "--zap-log-level", "1", "--leader-elect"})
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
	case <-time.After(30 * time.Second):
		t.Fatal("did not stop after SIGINT")
	}

	// deploy/rbac.yaml grants exactly what the command asked for, from its
	// start to its stop (which releases the Lease).
	rules := rbactest.Rules(t, "deploy/rbac.yaml", map[string]string{"fdb-lock": k.Namespace})
	rbactest.Check(t, rules, requests.Requests(), nil)
}
