package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/groundskeeper-io/groundskeeper/examples/internal/kubecmd"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/rbactest"
	"github.com/groundskeeper-io/groundskeeper/examples/internal/replicatest"
	"github.com/groundskeeper-io/groundskeeper/examples/statefulset-pvc/api"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const crdFile = "deploy/apps.examples.groundskeeper.io_replicatedsets.yaml"

// requests holds, for TestRBACCoversExactlyTheRequests, the API requests of
// every controller the tests ran, as RBAC sees them, each test's namespace
// replaced by statefulset-pvc, the controller's in deploy/rbac.yaml.
var requests struct {
	mu   sync.Mutex
	reqs []rbactest.Request
}

// policiesPassed: TestPolicies ran and passed, so the controllers went
// through every path (create, scale down, delete) for the RBAC check.
var policiesPassed atomic.Bool

// KEP-1847's table for a custom owner, against a real API server and the
// real garbage collector and PVC protection controller: for each policy, a
// ReplicatedSet of 3 is scaled to 1 (through the scale subresource), back to
// 3, and deleted; after each step the test checks which claims exist, their
// UIDs (reused or fresh) and their owner references.
func TestPolicies(t *testing.T) {
	testenv.StartKubernetes(t)                              // skip early when the control plane is not built
	t.Cleanup(func() { policiesPassed.Store(!t.Failed()) }) // after the subtests
	testPolicies(t, nil)
}

// TestPoliciesOnNodes is TestPolicies with pods that live, on fake nodes:
// scheduled and Running, their claims bound to volumes when they are
// scheduled, and a deleted pod Terminating for its grace period (3 s). The
// table ends the same, and at every step a claim is there as long as a pod
// that mounts it is, and is not being deleted while the scale-down's pod
// terminates: under whenScaled: Delete, the claim goes after its pod.
func TestPoliciesOnNodes(t *testing.T) {
	k := testenv.StartKubernetes(t)
	testPolicies(t, k.StartNodes(t, &testenv.NodeOptions{Count: 2}))
}

// testPolicies runs the table, on nodes when nodes is not nil.
func testPolicies(t *testing.T, nodes *testenv.Nodes) {
	for i, name := range []lifecycle.Name{lifecycle.Retain, lifecycle.DeleteOnOwnerDeletionOnly, lifecycle.DeleteOnScaledownOnly, lifecycle.DeleteOnScaledownAndOwnerDeletion} {
		t.Run(string(name), func(t *testing.T) {
			t.Parallel()
			p, _ := name.Policy()
			k := testenv.StartKubernetes(t)
			kc := installCRD(t, k.Config)
			startControllers(t, k, controllerOptions{resync: time.Minute})
			spec := setSpec(3)
			if i%2 == 0 { // both forms of the policy field
				spec.PersistentVolumeClaimRetentionPolicy = &api.RetentionPolicy{WhenDeleted: string(p.WhenDeleted), WhenScaled: string(p.WhenScaled)}
			} else {
				spec.PersistentVolumeClaimDeletePolicy = string(name)
			}
			w := watcher{t: t, c: k.Client, ns: k.Namespace}
			if nodes != nil {
				k.UseNodes(t, nodes)
				pool := k.NewVolumePool(t, &testenv.VolumeOptions{Count: 6})
				spec.VolumeClaimTemplates[0].StorageClassName = &pool.StorageClass
				spec.Template.TerminationGracePeriodSeconds = ptr.To[int64](3)
				w.check = claimsOutlivePods
			}
			set := createSet(t, kc, k.Namespace, "db", spec)
			setOwner := ""
			if p.DeletesOnOwnerDeletion() {
				setOwner = "ReplicatedSet db controller block"
			}

			// Created: three pods, three claims; the set owns its claims
			// from their creation when whenDeleted is Delete.
			created := w.until("created", func(s state) bool {
				return s.pods == "db-0 db-1 db-2" && s.claimsAre(map[string]string{"data-db-0": setOwner, "data-db-1": setOwner, "data-db-2": setOwner})
			})
			waitStatus(t, kc, k.Namespace, "db", func(st api.ReplicatedSetStatus) bool {
				return st.Replicas == 3 && st.Policy == string(name) && meta.IsStatusConditionTrue(st.Conditions, conditionClaimsReady)
			})

			// 3 -> 1: the claims of pods 1 and 2 go with their pods under
			// whenScaled: Delete, and stay otherwise (no pod reference: the
			// garbage collector will never delete them).
			if nodes != nil {
				w.until("running", func(s state) bool { return s.running == "db-0 db-1 db-2" })
				w.check = claimsOutlivePodsNotDeleted
			}
			scale(t, kc, k.Namespace, "db", 1)
			want := map[string]string{"data-db-0": setOwner}
			if !p.DeletesOnScaledown() {
				want["data-db-1"], want["data-db-2"] = setOwner, setOwner
			}
			down := w.until("scaled to 1", func(s state) bool { return s.pods == "db-0" && s.claimsAre(want) })
			if nodes != nil {
				w.check = claimsOutlivePods
			}
			for claim, c := range down.claims {
				if c.uid != created.claims[claim].uid {
					t.Errorf("after 3 -> 1, claim %s has uid %s, was %s", claim, c.uid, created.claims[claim].uid)
				}
			}

			// 1 -> 3: retained claims are reused (same UID); deleted ones
			// are created afresh.
			start := time.Now()
			scale(t, kc, k.Namespace, "db", 3)
			up := w.until("scaled back to 3", func(s state) bool {
				return s.pods == "db-0 db-1 db-2" && s.claimsAre(map[string]string{"data-db-0": setOwner, "data-db-1": setOwner, "data-db-2": setOwner})
			})
			t.Logf("scaled 1 -> 3 in %s (pods and claims seen within 100 ms)", time.Since(start).Round(10*time.Millisecond))
			for _, claim := range []string{"data-db-1", "data-db-2"} {
				reused := up.claims[claim].uid == created.claims[claim].uid
				if reused == p.DeletesOnScaledown() {
					t.Errorf("after 1 -> 3, claim %s: reused=%v (uid %s, first uid %s); policy %s wants reused=%v",
						claim, reused, up.claims[claim].uid, created.claims[claim].uid, name, !p.DeletesOnScaledown())
				}
			}
			if up.claims["data-db-0"].uid != created.claims["data-db-0"].uid {
				t.Errorf("claim data-db-0 was replaced")
			}

			// Deleted: the garbage collector deletes the pods, and the
			// claims under whenDeleted: Delete.
			waitForGC(t)
			if err := kc.Delete(context.Background(), set, client.Preconditions{UID: &set.UID}); err != nil {
				t.Fatal(err)
			}
			want = map[string]string{}
			if !p.DeletesOnOwnerDeletion() {
				want = map[string]string{"data-db-0": "", "data-db-1": "", "data-db-2": ""}
			}
			gone := w.until("set deleted", func(s state) bool { return s.pods == "" && s.claimsAre(want) })
			for claim, c := range gone.claims {
				if c.uid != up.claims[claim].uid {
					t.Errorf("after deletion, claim %s has uid %s, was %s", claim, c.uid, up.claims[claim].uid)
				}
			}
		})
	}
}

// KEP-1847: a pod deleted by hand (not by a scale-down) comes back on the
// same claim, whatever the policy; a policy change re-converges the owner
// references of existing claims, to and from Retain; and a non-cascading
// deletion of the set deletes no claim.
//
// Two replicas run; after the set is created the leader stops, and the
// other replica takes over and does the rest.
func TestManualPodDeletionAndPolicyChange(t *testing.T) {
	k := testenv.StartKubernetes(t)
	kc := installCRD(t, k.Config)
	replicas := startControllers(t, k, controllerOptions{resync: time.Minute})
	spec := setSpec(2)
	spec.PersistentVolumeClaimDeletePolicy = string(lifecycle.DeleteOnScaledownOnly)
	set := createSet(t, kc, k.Namespace, "db", spec)
	w := watcher{t: t, c: k.Client, ns: k.Namespace}
	none := map[string]string{"data-db-0": "", "data-db-1": ""}
	created := w.until("created", func(s state) bool { return s.pods == "db-0 db-1" && s.claimsAre(none) })
	replicas.stopLeader(t)
	pod, err := k.Client.CoreV1().Pods(k.Namespace).Get(context.Background(), "db-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := k.Client.CoreV1().Pods(k.Namespace).Delete(context.Background(), "db-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w.until("pod db-1 recreated", func(s state) bool {
		p, err := k.Client.CoreV1().Pods(k.Namespace).Get(context.Background(), "db-1", metav1.GetOptions{})
		return err == nil && p.UID != pod.UID && s.claimsAre(none) && s.claims["data-db-1"].uid == created.claims["data-db-1"].uid
	})

	setPolicy := func(name lifecycle.Name) {
		body := fmt.Appendf(nil, `{"spec":{"persistentVolumeClaimDeletePolicy":%q}}`, name)
		if err := kc.Patch(context.Background(), set, client.RawPatch(types.MergePatchType, body)); err != nil {
			t.Fatal(err)
		}
	}
	setPolicy(lifecycle.DeleteOnScaledownAndOwnerDeletion)
	owned := map[string]string{"data-db-0": "ReplicatedSet db controller block", "data-db-1": "ReplicatedSet db controller block"}
	w.until("policy set to DeleteOnScaledownAndOwnerDeletion", func(s state) bool { return s.claimsAre(owned) })
	setPolicy(lifecycle.Retain)
	w.until("policy set to Retain", func(s state) bool { return s.claimsAre(none) })

	// Non-cascading deletion under a policy that deletes: the garbage
	// collector orphans pods and claims (removes the set's references)
	// instead of deleting them.
	setPolicy(lifecycle.DeleteOnScaledownAndOwnerDeletion)
	w.until("policy set to DeleteOnScaledownAndOwnerDeletion again", func(s state) bool { return s.claimsAre(owned) })
	waitForGC(t)
	if err := kc.Delete(context.Background(), set, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	after := w.until("set deleted with --cascade=orphan", func(s state) bool {
		err := kc.Get(context.Background(), client.ObjectKeyFromObject(set), &api.ReplicatedSet{})
		return apierrors.IsNotFound(err) && s.pods == "db-0 db-1" && s.claimsAre(none)
	})
	for claim, c := range after.claims {
		if c.uid != created.claims[claim].uid {
			t.Errorf("claim %s replaced", claim)
		}
	}
}

// Claims the set does not own are left alone: one controlled by another
// object keeps its controller (a ConflictingController event and status
// condition say so, and the set's deletion leaves it), and claims whose
// names are not the set's template names in range are never written to.
// The command itself runs, flags and all, with leader election, against
// the test API server's kubeconfig, stopped with SIGINT as a pod is with
// SIGTERM.
func TestForeignClaimsWithRun(t *testing.T) {
	k := testenv.StartKubernetes(t)
	kc := installCRD(t, k.Config)
	ctx := context.Background()
	claims := k.Client.CoreV1().PersistentVolumeClaims(k.Namespace)

	backup, err := k.Client.CoreV1().ConfigMaps(k.Namespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "backup"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	foreign := map[string]*corev1.PersistentVolumeClaim{}
	for _, c := range []*corev1.PersistentVolumeClaim{
		// data-web-0 is the name of the set's claim for pod 0, but another
		// controller controls it.
		claim("data-web-0", nil, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "backup", UID: backup.UID, Controller: &yes}),
		claim("data-other-0", nil),                                     // another set's
		claim("data-web-5", nil),                                       // out of range: no pod 5
		claim("scratch-web-0", map[string]string{api.SetLabel: "web"}), // the set's label, not its template
	} {
		created, err := claims.Create(ctx, c, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		foreign[c.Name] = created
	}

	probes := replicatest.FreeAddr(t)
	done := make(chan error, 1)
	go func() {
		done <- run([]string{"--kubeconfig", k.Kubeconfig, "--namespace", k.Namespace, "--zap-log-level", "1", "--leader-elect",
			"--health-probe-bind-address", probes})
	}()
	replicatest.WaitReady(t, "http://"+probes+"/readyz")
	spec := setSpec(2)
	spec.PersistentVolumeClaimDeletePolicy = string(lifecycle.DeleteOnScaledownAndOwnerDeletion)
	set := createSet(t, kc, k.Namespace, "web", spec)

	w := watcher{t: t, c: k.Client, ns: k.Namespace}
	backupOwner := "ConfigMap backup controller"
	w.until("created", func(s state) bool {
		return s.pods == "web-0 web-1" && s.claimsAre(map[string]string{"data-web-0": backupOwner, "data-web-1": "ReplicatedSet web controller block",
			"data-other-0": "", "data-web-5": "", "scratch-web-0": ""})
	})
	waitStatus(t, kc, k.Namespace, "web", func(st api.ReplicatedSetStatus) bool {
		c := meta.FindStatusCondition(st.Conditions, conditionClaimsReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == lifecycle.ReasonConflictingController && strings.Contains(c.Message, "data-web-0")
	})
	waitEvent(t, k.Client, k.Namespace, "web", lifecycle.ReasonConflictingController, "data-web-0")

	scale(t, kc, k.Namespace, "web", 1)
	w.until("scaled to 1", func(s state) bool {
		return s.pods == "web-0" && s.claimsAre(map[string]string{"data-web-0": backupOwner, "data-other-0": "", "data-web-5": "", "scratch-web-0": ""})
	})
	waitForGC(t)
	if err := kc.Delete(ctx, set, client.Preconditions{UID: &set.UID}); err != nil {
		t.Fatal(err)
	}
	w.until("set deleted", func(s state) bool {
		return s.pods == "" && s.claimsAre(map[string]string{"data-web-0": backupOwner, "data-other-0": "", "data-web-5": "", "scratch-web-0": ""})
	})
	for name, before := range foreign {
		now, err := claims.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if name == "data-web-0" {
			// CheckReuse recorded the pod that mounts it (an annotation);
			// its owners are untouched.
			if !slices.EqualFunc(now.OwnerReferences, before.OwnerReferences, func(a, b metav1.OwnerReference) bool { return a.UID == b.UID && *a.Controller == *b.Controller }) {
				t.Errorf("claim %s owners changed: %v -> %v", name, before.OwnerReferences, now.OwnerReferences)
			}
		} else if now.ResourceVersion != before.ResourceVersion {
			t.Errorf("claim %s was written to (resourceVersion %s -> %s): %+v", name, before.ResourceVersion, now.ResourceVersion, now.ObjectMeta)
		}
	}

	if _, err := k.Client.CoordinationV1().Leases(k.Namespace).Get(ctx, "statefulset-pvc", metav1.GetOptions{}); err != nil {
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
}

// With --dry-run, a scale-down and the deletion of the set delete no pod
// and no claim: the controller only reports what it would do.
func TestDryRunDeletesNothing(t *testing.T) {
	k := testenv.StartKubernetes(t)
	kc := installCRD(t, k.Config)
	startControllers(t, k, controllerOptions{dryRun: true, resync: time.Minute})
	spec := setSpec(3)
	spec.PersistentVolumeClaimDeletePolicy = string(lifecycle.DeleteOnScaledownAndOwnerDeletion)
	set := createSet(t, kc, k.Namespace, "dry", spec)
	w := watcher{t: t, c: k.Client, ns: k.Namespace}
	all := map[string]string{"data-dry-0": "", "data-dry-1": "", "data-dry-2": ""}
	created := w.until("created", func(s state) bool { return s.pods == "dry-0 dry-1 dry-2" && s.claimsAre(all) })
	waitEvent(t, k.Client, k.Namespace, "dry", lifecycle.ReasonDryRun, "would set the owner references of Claim data-dry-0 to [ReplicatedSet dry (controller)]")

	scale(t, kc, k.Namespace, "dry", 1)
	waitEvent(t, k.Client, k.Namespace, "dry", lifecycle.ReasonDryRun, "would delete Pod dry-2")
	waitStatus(t, kc, k.Namespace, "dry", func(st api.ReplicatedSetStatus) bool { return st.ObservedGeneration == 2 })
	if s := w.read(); s.pods != "dry-0 dry-1 dry-2" || !s.claimsAre(all) {
		t.Errorf("after a dry-run scale-down: %s", s)
	}
	waitForGC(t)
	if err := kc.Delete(context.Background(), set, client.Preconditions{UID: &set.UID}); err != nil {
		t.Fatal(err)
	}
	// The garbage collector takes the pods (the set owns them); the claims
	// carry no reference, so they stay.
	gone := w.until("set deleted", func(s state) bool { return s.pods == "" && s.claimsAre(all) })
	for name, c := range gone.claims {
		if c.uid != created.claims[name].uid {
			t.Errorf("claim %s replaced", name)
		}
	}
}

// The generated CRD rejects a bad policy before the controller sees it, with
// an error naming the field and the value.
func TestCRDRejectsBadPolicies(t *testing.T) {
	k := testenv.StartKubernetes(t)
	kc := installCRD(t, k.Config)
	for _, tc := range []struct {
		name string
		edit func(*api.ReplicatedSetSpec)
		want []string
	}{
		{"unknown whenDeleted", func(s *api.ReplicatedSetSpec) {
			s.PersistentVolumeClaimRetentionPolicy = &api.RetentionPolicy{WhenDeleted: "Orphan"}
		}, []string{"spec.persistentVolumeClaimRetentionPolicy.whenDeleted", `"Orphan"`}},
		{"unknown name", func(s *api.ReplicatedSetSpec) {
			s.PersistentVolumeClaimDeletePolicy = "DeleteOnStatefulSetDeletionOnly"
		},
			[]string{"spec.persistentVolumeClaimDeletePolicy", `"DeleteOnStatefulSetDeletionOnly"`}},
		{"both fields", func(s *api.ReplicatedSetSpec) {
			s.PersistentVolumeClaimRetentionPolicy = &api.RetentionPolicy{WhenDeleted: "Delete"}
			s.PersistentVolumeClaimDeletePolicy = "Retain"
		}, []string{"set persistentVolumeClaimRetentionPolicy or persistentVolumeClaimDeletePolicy, not both"}},
	} {
		spec := setSpec(1)
		tc.edit(&spec)
		err := kc.Create(context.Background(), &api.ReplicatedSet{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: "bad"}, Spec: spec})
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s: got %v, want Invalid", tc.name, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v does not mention %s", tc.name, err, w)
			}
		}
	}
}

// The Role in deploy/rbac.yaml grants exactly what the managers in these
// tests (leader election included) asked the API server for: nothing they needed is missing, nothing
// granted went unused (except what only some runs need, named below).
func TestRBACCoversExactlyTheRequests(t *testing.T) {
	if !policiesPassed.Load() {
		t.Skip("needs the requests of a passing TestPolicies: run it in the same go test")
	}
	rules := rbactest.Rules(t, "deploy/rbac.yaml", nil)
	requests.mu.Lock()
	defer requests.mu.Unlock()
	reqs := requests.reqs
	rbactest.Check(t, rules, reqs, map[string]string{
		"patch events.events.k8s.io": "an event that repeats becomes a series, which the recorder patches",
	})
}

// ---- helpers ----

func setSpec(replicas int32) api.ReplicatedSetSpec {
	return api.ReplicatedSetSpec{
		Replicas:             &replicas,
		Template:             api.PodTemplate{Image: "registry.example/db:1", Command: []string{"db", "--data=/data/data"}},
		VolumeClaimTemplates: []api.ClaimTemplate{{Name: "data", Size: resource.MustParse("1Gi")}},
	}
}

func claim(name string, labels map[string]string, owners ...metav1.OwnerReference) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, OwnerReferences: owners},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

// The CRD is installed once per test binary (the control plane is shared).
// The garbage collector discovers new resources only every 30 seconds, and
// before it has, it does not notice that a ReplicatedSet was deleted; a
// probe in the background finds out when it has, while the tests create and
// scale their sets, and waitForGC waits for it before a set is deleted.
var crd struct {
	once    sync.Once
	err     error
	gcReady chan struct{}
	gcErr   error
}

// installCRD creates the generated CRD (once per control plane), waits
// until ReplicatedSets are served, and returns a client that reads and
// writes them typed.
func installCRD(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	crd.once.Do(func() {
		crd.gcReady = make(chan struct{})
		var c client.Client
		if c, crd.err = createCRD(cfg); crd.err == nil {
			go func() {
				defer close(crd.gcReady)
				crd.gcErr = probeGC(c)
			}()
		}
	})
	if crd.err != nil {
		t.Fatal(crd.err)
	}
	return newClient(t, cfg)
}

// newClient returns a controller-runtime client of the API server, with
// ReplicatedSets in its scheme.
func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := clientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func clientFor(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := api.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// createCRD creates the CRD and returns a client once ReplicatedSets are
// served.
func createCRD(cfg *rest.Config) (client.Client, error) {
	f, err := os.Open(crdFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var obj unstructured.Unstructured
	if err := yaml.NewYAMLOrJSONDecoder(f, 4096).Decode(&obj.Object); err != nil {
		return nil, fmt.Errorf("%s: %w", crdFile, err)
	}
	ctx := context.Background()
	c, err := clientFor(cfg)
	if err != nil {
		return nil, err
	}
	if err := c.Create(ctx, &obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		// A new client each time: a client's REST mapper may remember
		// that the kind was not served.
		c, err := clientFor(cfg)
		if err == nil {
			err = c.List(ctx, &api.ReplicatedSetList{}, client.InNamespace("default"))
		}
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("replicatedsets not served: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// probeGC returns once the garbage collector deletes a ConfigMap owned by a
// deleted ReplicatedSet (in namespace default, where no controller runs).
func probeGC(c client.Client) error {
	ctx := context.Background()
	deadline := time.Now().Add(90 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		name := fmt.Sprintf("gc-probe-%d", i)
		set := &api.ReplicatedSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}, Spec: setSpec(0)}
		if err := c.Create(ctx, set); err != nil {
			return err
		}
		dep := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: api.GroupVersion.String(), Kind: api.Kind, Name: name, UID: set.UID}}}}
		if err := c.Create(ctx, dep); err != nil {
			return err
		}
		if err := c.Delete(ctx, set); err != nil {
			return err
		}
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
			if err := c.Get(ctx, client.ObjectKeyFromObject(dep), &corev1.ConfigMap{}); apierrors.IsNotFound(err) {
				return nil
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return errors.New("the garbage collector did not handle ReplicatedSets within 90s")
}

// waitForGC waits until the garbage collector handles ReplicatedSets.
func waitForGC(t *testing.T) {
	t.Helper()
	start := time.Now()
	<-crd.gcReady
	if crd.gcErr != nil {
		t.Fatal(crd.gcErr)
	}
	if d := time.Since(start); d > time.Second {
		t.Logf("waited %s for the garbage collector to discover ReplicatedSets", d.Round(100*time.Millisecond))
	}
}

func createSet(t *testing.T, c client.Client, ns, name string, spec api.ReplicatedSetSpec) *api.ReplicatedSet {
	t.Helper()
	set := &api.ReplicatedSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if err := c.Create(context.Background(), set); err != nil {
		t.Fatal(err)
	}
	return set
}

// scale sets spec.replicas through the scale subresource, as kubectl scale
// does.
func scale(t *testing.T, c client.Client, ns, name string, n int) {
	t.Helper()
	body := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)
	set := &api.ReplicatedSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := c.SubResource("scale").Patch(context.Background(), set, client.RawPatch(types.MergePatchType, body),
		client.WithSubResourceBody(&autoscalingv1.Scale{})); err != nil {
		t.Fatalf("scale %s to %d: %v", name, n, err)
	}
}

func waitStatus(t *testing.T, c client.Client, ns, name string, done func(api.ReplicatedSetStatus) bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var set api.ReplicatedSet
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &set); err != nil {
			t.Fatal(err)
		}
		if done(set.Status) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("status of %s: %+v", name, set.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func waitEvent(t *testing.T, c kubernetes.Interface, ns, object, reason, contains string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		events, err := c.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + object + ",reason=" + reason})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events.Items {
			if strings.Contains(e.Message, contains) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s event on %s containing %q (have %d)", reason, object, contains, len(events.Items))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// state is what the test looks at: the pods and claims of the namespace.
type state struct {
	pods    string // names, sorted, space-separated
	running string // those Running and not terminating (on nodes)
	claims  map[string]claimState
}

type claimState struct {
	uid         types.UID
	owners      string // "Kind name [controller] [block]", comma-separated
	terminating bool
}

// claimsAre reports whether exactly the given claims exist (none being
// deleted), with the given owners.
func (s state) claimsAre(want map[string]string) bool {
	if len(s.claims) != len(want) {
		return false
	}
	for name, owners := range want {
		c, ok := s.claims[name]
		if !ok || c.terminating || c.owners != owners {
			return false
		}
	}
	return true
}

func (s state) String() string {
	b, _ := json.Marshal(map[string]any{"pods": s.pods, "claims": fmt.Sprintf("%+v", s.claims)})
	return string(b)
}

type watcher struct {
	t  *testing.T
	c  kubernetes.Interface
	ns string
	// check, when set, is an invariant of every state read: it returns
	// what is wrong, or "".
	check func(state) string
}

// claimsOutlivePods: the claim of each pod that exists, terminating or
// not, exists too (the PVC protection finalizer keeps a claim being
// deleted while a pod uses it).
func claimsOutlivePods(s state) string {
	for _, pod := range strings.Fields(s.pods) {
		if _, ok := s.claims["data-"+pod]; !ok {
			return fmt.Sprintf("pod %s exists, its claim data-%s does not", pod, pod)
		}
	}
	return ""
}

// claimsOutlivePodsNotDeleted: the claim of each pod that exists,
// terminating or not, exists and is not being deleted: its policy acts
// once the pod is gone.
func claimsOutlivePodsNotDeleted(s state) string {
	for _, pod := range strings.Fields(s.pods) {
		if c, ok := s.claims["data-"+pod]; !ok || c.terminating {
			return fmt.Sprintf("pod %s exists, its claim data-%s is gone or being deleted", pod, pod)
		}
	}
	return ""
}

func (w watcher) read() state {
	ctx := context.Background()
	pods, err := w.c.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		w.t.Fatal(err)
	}
	// The claims as they were when the pods were listed (the same etcd
	// revision): two lists one after the other could see a pod that has
	// gone since, beside its claim that the garbage collector deletes
	// meanwhile, and report a claim deleted under its pod.
	claims, err := w.c.CoreV1().PersistentVolumeClaims(w.ns).List(ctx, metav1.ListOptions{
		ResourceVersion: pods.ResourceVersion, ResourceVersionMatch: metav1.ResourceVersionMatchExact})
	if err != nil {
		w.t.Fatal(err)
	}
	var names, running []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p.Name)
		}
	}
	slices.Sort(names)
	slices.Sort(running)
	s := state{pods: strings.Join(names, " "), running: strings.Join(running, " "), claims: map[string]claimState{}}
	for _, c := range claims.Items {
		var owners []string
		for _, r := range c.OwnerReferences {
			o := r.Kind + " " + r.Name
			if r.Controller != nil && *r.Controller {
				o += " controller"
			}
			if r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion {
				o += " block"
			}
			owners = append(owners, o)
		}
		s.claims[c.Name] = claimState{uid: c.UID, owners: strings.Join(owners, ", "), terminating: c.DeletionTimestamp != nil}
	}
	return s
}

// until polls until done holds, for at most 2 minutes (the garbage collector
// takes a few seconds).
func (w watcher) until(step string, done func(state) bool) state {
	w.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		s := w.read()
		if w.check != nil {
			if wrong := w.check(s); wrong != "" {
				w.t.Fatalf("%s: %s; now %s", step, wrong, s)
			}
		}
		if done(s) {
			return s
		}
		if time.Now().After(deadline) {
			w.t.Fatalf("%s: not reached after 2 minutes; now %s", step, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// replica is one replica of the controller: its manager and how to stop it.
type replica struct {
	name string
	mgr  manager.Manager
	stop context.CancelFunc
	done chan error
}

type replicas []*replica

// startControllers runs two replicas of the controller, each its own
// manager with leader election on the Lease statefulset-pvc, as the
// Deployment in deploy/ does, until the test ends. Their requests are
// added to requests.
func startControllers(t *testing.T, k *testenv.Kubernetes, o controllerOptions) replicas {
	t.Helper()
	common := kubecmd.Flags{Namespace: k.Namespace, LeaderElect: true}
	var rec rbactest.Recorder
	var out replicas
	for i := range 2 {
		name := fmt.Sprintf("replica-%d", i)
		log := replicatest.Logger(t).WithName(name)
		mgr, err := newManager(rec.Wrap(k.Config), &common, o, replicatest.Options(log))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), log))
		r := &replica{name: name, mgr: mgr, stop: cancel, done: make(chan error, 1)}
		go func() { r.done <- mgr.Start(ctx) }()
		out = append(out, r)
	}
	t.Cleanup(func() {
		for _, r := range out {
			r.stop()
			if err := <-r.done; err != nil {
				t.Errorf("%s: %v", r.name, err)
			}
		}
		requests.mu.Lock()
		defer requests.mu.Unlock()
		for _, r := range rec.Requests() {
			if r.Namespace == k.Namespace {
				r.Namespace = "statefulset-pvc"
			}
			requests.reqs = append(requests.reqs, r)
		}
	})
	return out
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
// as on a rolling update) and waits until the other one leads.
func (rs replicas) stopLeader(t *testing.T) {
	t.Helper()
	old := rs.leader(t)
	start := time.Now()
	old.stop()
	if err := <-old.done; err != nil {
		t.Fatalf("%s: %v", old.name, err)
	}
	old.done <- nil // for the cleanup
	var rest replicas
	for _, r := range rs {
		if r != old {
			rest = append(rest, r)
		}
	}
	next := rest.leader(t)
	t.Logf("%s stopped; %s leads %s later", old.name, next.name, time.Since(start).Round(10*time.Millisecond))
}
