package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/groundskeeper-io/groundskeeper/examples/internal/chaos"
	"github.com/groundskeeper-io/groundskeeper/examples/statefulset-pvc/api"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
	"github.com/groundskeeper-io/groundskeeper/testenv/faultproxy"
)

// shortSeed is the seed of the short run; CHAOS_SEED replays another.
// (1847, the KEP's number, drew no node stop once NodeStops joined the
// faults; 1865 draws one, at 19 s, among every other kind.)
const shortSeed = 1865

// plantSeed is the seed of the planted-bug runs (no faults): the one each
// plant was shown caught with.
const plantSeed = 1847

// TestChaos runs the statefulset-pvc workload on a control plane of its
// own, with two fake nodes where the pods run and take their grace period
// (2 s) to die, while its components restart, the replicas' connections
// fail, replicas are killed and a node stops answering for a while, then
// checks the invariants (see chaos_check_test.go). Without CHAOS_DURATION
// it is the short run, 60 s of faults from a fixed seed, which make test
// runs; make chaos sets CHAOS_DURATION.
func TestChaos(t *testing.T) {
	seed, duration := chaos.Plan(t, shortSeed)

	k := testenv.StartIsolatedKubernetes(t)
	c, err := createCRD(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	nodes := k.StartNodes(t, &testenv.NodeOptions{Count: 2})
	// A volume per claim (a released volume is never bound again).
	pool := k.NewVolumePool(t, &testenv.VolumeOptions{Count: 50 + 150*int(duration/time.Minute+1)})
	// The garbage collector deletes the pods and claims of deleted sets
	// only once it has discovered the CRD (every 30 s).
	start := time.Now()
	if err := probeGC(c); err != nil {
		t.Fatal(err)
	}
	t.Logf("the garbage collector handles ReplicatedSets after %s", time.Since(start).Round(100*time.Millisecond))

	replicaProxies, replicaConfig := chaos.ReplicaProxies(t, k, 2)
	world := spWorld{direct: k.Config, ns: k.Namespace,
		replicaConfig: replicaConfig, auditLog: k.AuditLog,
		storageClass: pool.StorageClass, podGrace: 2,
	}
	log, logPath, err := chaos.FileLogger(t, "statefulset-pvc", seed)
	if err != nil {
		t.Fatal(err)
	}
	// client-go's own goroutines (event broadcasters) log through klog
	// after the test returns: the logger is set for the rest of the
	// process, never cleared, which would race with them.
	klog.SetLogger(log.WithName("klog"))
	ctrllog.SetLogger(log)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The bound: a leader killed just before the faults stop keeps its
	// Lease for 15 s; then one pod deleted per pass and scale-down, the
	// garbage collector (which rebuilds its graph after a restart) and
	// the pvc-protection finalizer; doubled for a loaded machine.
	// The replicas are processes of the example's binary, as main wires
	// it, with the flags runManager gives the in-process ones.
	process := &chaos.Process{Binary: chaos.Build(t, "."), Dir: t.TempDir(), Log: log,
		Args: func(_ int, kubeconfig string) []string {
			return []string{"--kubeconfig=" + kubeconfig, "--namespace=" + k.Namespace, "--leader-elect",
				"--metrics-bind-address=0", "--health-probe-bind-address=0", "--zap-log-level=1", "--zap-devel", "--resync=1m"}
		}}
	// A replica's delete request may be held by a fault for up to the
	// schedule's longest hold (12 s), or wait out an API server restart:
	// the checker judges a claim's deletion against the pods created 15 s
	// before it or earlier.
	g, err := newSPWorkload(ctx, world, spOptions{bound: 60 * time.Second, process: process, log: log, mountRace: 15 * time.Second}, seed)
	if err != nil {
		t.Fatal(err)
	}
	faults := append(chaos.ControlPlaneFaults(k), chaos.KillReplica(g.replicas))
	faults = append(faults, chaos.ConnectionFaults(replicaProxies, []*faultproxy.Proxy{replicaProxies[0], replicaProxies[1], k.EtcdProxy})...)
	faults = append(faults, chaos.NodeStops(nodes))
	res := runSP(ctx, t, g, chaos.Config{
		Name: "statefulset-pvc", Seed: seed, Duration: duration, Faults: faults,
		Schedule:      &chaos.ScheduleOptions{MinGap: 2 * time.Second, MaxGap: 6 * time.Second, MinHold: time.Second, MaxHold: 12 * time.Second},
		SettleTimeout: 90 * time.Second,
	})
	chaos.Report(t, res, logPath)
	if res.Ops["scale down"] == 0 || res.Ops["delete set"] == 0 || res.Ops["observed: pods deleted (not by hand)"] == 0 || res.Ops["observed: claims deleted"] == 0 {
		t.Errorf("no scale-down, set deletion, pod or claim deletion: the run proves nothing\n%s", res.Table())
	}
	if res.Ops["foreign pod mounts claims"] == 0 {
		t.Errorf("no foreign pod mounted a claim: the run proves nothing about them\n%s", res.Table())
	}
	if res.Faults["node stops answering"] == 0 {
		t.Errorf("no node stopped answering: the run proves nothing about pods that may still run\n%s", res.Table())
	}
}

// runSP runs the workload g under cfg's faults with its replicas, which
// keep running while the system settles and stop when the run is over.
func runSP(ctx context.Context, t *testing.T, g *spWorkload, cfg chaos.Config) *chaos.Result {
	cfg.Replicas, cfg.Workload, cfg.Settled, cfg.Check = g.replicas, g.generate, g.settled, g.check
	cfg.Observed, cfg.Logf = g.observed, t.Logf
	return chaos.Run(ctx, cfg)
}

// Planted bugs: test-only wrappers of the replicas' client.

// policyAlwaysDeletes reads every set's policy as
// DeleteOnScaledownAndOwnerDeletion: claims that Retain keeps get owner
// references, and the garbage collector deletes them.
func policyAlwaysDeletes(c client.WithWatch) client.Client {
	rewrite := func(obj client.Object) {
		if set, ok := obj.(*api.ReplicatedSet); ok {
			set.Spec.PersistentVolumeClaimRetentionPolicy = nil
			set.Spec.PersistentVolumeClaimDeletePolicy = string(lifecycle.DeleteOnScaledownAndOwnerDeletion)
		}
	}
	return interceptor.NewClient(c, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			err := c.Get(ctx, key, obj, opts...)
			rewrite(obj)
			return err
		},
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			err := c.List(ctx, list, opts...)
			if l, ok := list.(*api.ReplicatedSetList); ok {
				for i := range l.Items {
					rewrite(&l.Items[i])
				}
			}
			return err
		},
	})
}

// scaleDownDeletesLowest deletes pod 0 of the set whenever the controller
// deletes a higher pod: the wrong end of the set on scale-down.
func scaleDownDeletesLowest(c client.WithWatch) client.Client {
	return interceptor.NewClient(c, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return c.Delete(ctx, obj, opts...)
			}
			set, _ := parseMember("pod", pod.Name)
			var lowest corev1.Pod
			if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: api.PodName(set, 0)}, &lowest); err != nil {
				return err
			}
			return c.Delete(ctx, &lowest)
		},
	})
}

// claimsWithoutOwners drops the owner references of the claims it creates
// and patches: the garbage collector never deletes them.
func claimsWithoutOwners(c client.WithWatch) client.Client {
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if claim, ok := obj.(*corev1.PersistentVolumeClaim); ok {
				claim.OwnerReferences = nil
			}
			return c.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			if _, ok := obj.(*corev1.PersistentVolumeClaim); !ok {
				return c.Patch(ctx, obj, patch, opts...)
			}
			data, err := patch.Data(obj)
			if err != nil {
				return err
			}
			var body map[string]any
			if err := json.Unmarshal(data, &body); err != nil {
				return err
			}
			if m, ok := body["metadata"].(map[string]any); ok {
				delete(m, "ownerReferences")
			}
			if data, err = json.Marshal(body); err != nil {
				return err
			}
			return c.Patch(ctx, obj, client.RawPatch(patch.Type(), data), opts...)
		},
	})
}

// scaleDownDeletesClaims deletes a condemned pod's claims itself once it
// deleted the pod, whatever the policy, rather than leave them to the
// garbage collector, and without a look at the other pods that mount them.
func scaleDownDeletesClaims(c client.WithWatch) client.Client {
	return interceptor.NewClient(c, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return c.Delete(ctx, obj, opts...)
			}
			// The pod being deleted, with its volumes (the delete request
			// names it only).
			if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
			if err := c.Delete(ctx, obj, opts...); err != nil {
				return err
			}
			for _, v := range pod.Spec.Volumes {
				if v.PersistentVolumeClaim != nil {
					claim := &corev1.PersistentVolumeClaim{}
					claim.Namespace, claim.Name = pod.Namespace, v.PersistentVolumeClaim.ClaimName
					_ = c.Delete(ctx, claim)
				}
			}
			return nil
		},
	})
}

// condemnedClaimsDeletedOnceGone deletes a condemned pod's claims itself,
// those the pod owns (whenScaled: Delete), once it deleted the pod and
// takes it for gone, unless another pod mounts them, rather than leave
// them to the garbage collector. It reads pods and claims fresh from the
// API server (unstructured objects bypass the manager's cache, whose pods
// are the sets' only), and it takes a terminating pod for gone: off nodes,
// where a deleted pod is gone at once, it does what the garbage collector
// would; on nodes it deletes a claim while the pod that mounts it, or a
// backup pod being deleted, terminates and may still run.
func condemnedClaimsDeletedOnceGone(c client.WithWatch) client.Client {
	return interceptor.NewClient(c, interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return c.Delete(ctx, obj, opts...)
			}
			// The pod being deleted, with its volumes (the delete request
			// names it only).
			if err := freshGet(ctx, c, client.ObjectKeyFromObject(pod), pod); err != nil {
				return err
			}
			if err := c.Delete(ctx, obj, opts...); err != nil {
				return err
			}
			var now corev1.Pod
			switch err := freshGet(ctx, c, client.ObjectKeyFromObject(pod), &now); {
			case apierrors.IsNotFound(err):
			case err != nil:
				return nil
			case now.UID == pod.UID && now.DeletionTimestamp == nil:
				return nil // still there: the garbage collector's
			}
			// The planted bug: the pod, terminating, counts as gone, and
			// so does every other terminating pod below.
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
			if err := c.List(ctx, list, client.InNamespace(pod.Namespace)); err != nil {
				return nil
			}
			mounted := map[string]bool{}
			for _, u := range list.Items {
				var p corev1.Pod
				if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p) != nil || p.DeletionTimestamp != nil {
					continue
				}
				for _, v := range p.Spec.Volumes {
					if v.PersistentVolumeClaim != nil {
						mounted[v.PersistentVolumeClaim.ClaimName] = true
					}
				}
			}
			for _, v := range pod.Spec.Volumes {
				if v.PersistentVolumeClaim == nil || mounted[v.PersistentVolumeClaim.ClaimName] {
					continue
				}
				claim := &corev1.PersistentVolumeClaim{}
				if freshGet(ctx, c, client.ObjectKey{Namespace: pod.Namespace, Name: v.PersistentVolumeClaim.ClaimName}, claim) != nil {
					continue
				}
				if slices.ContainsFunc(claim.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == pod.UID }) {
					_ = c.Delete(ctx, claim, client.Preconditions{UID: &claim.UID})
				}
			}
			return nil
		},
	})
}

// freshGet reads the object from the API server, not the manager's cache,
// as an unstructured object, into obj.
func freshGet(ctx context.Context, c client.Client, key client.ObjectKey, obj client.Object) error {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	if err := c.Get(ctx, key, u); err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj)
}

// Each invariant catches a planted bug: the workload runs without faults
// on the shared control plane, with the replicas' client broken by a
// test-only wrapper, and the checker must report the invariant.
func TestChaosCheckerCatchesPlantedBugs(t *testing.T) {
	k := testenv.StartKubernetes(t) // skip early when the control plane is not built
	installCRD(t, k.Config)
	for _, tc := range []struct {
		name string
		wrap func(client.WithWatch) client.Client
		// blind hides the claim deletions the watch saw from the checker,
		// on a control plane of its own whose audit log records them:
		// only the audit log can catch the bug.
		blind bool
		// audited runs on a control plane of its own, whose audit log says
		// who sent each deletion.
		audited bool
		// long runs the workload 25 s rather than 12.
		long bool
		// onNodes runs the pods on two fake nodes (with audited): a
		// deleted pod terminates for 2 s, its claim mounted.
		onNodes bool
		want    []string
	}{
		// A cache that misreads the policy no longer costs a claim: SyncSet
		// reads the owner's policy fresh (the API reader, which this plant
		// does not reach) and gives up when it differs, so a cache that
		// always misreads makes no progress (liveness) and loses nothing.
		// Until the plant reaches the fresh read too, invClaimSafety and
		// invKept have no planted bug of their own.
		{"policy read as DeleteOnScaledownAndOwnerDeletion", policyAlwaysDeletes, false, false, false, false, []string{invLiveness}},
		{"policy read as DeleteOnScaledownAndOwnerDeletion, the claim watch blind", policyAlwaysDeletes, true, true, false, false, []string{invLiveness}},
		{"scale-down deletes pod 0", scaleDownDeletesLowest, false, false, false, false, []string{invPodSafety, invLiveness}},
		{"claims lose their owner references", claimsWithoutOwners, false, false, false, false, []string{invLiveness}},
		// Backup pods mount the claim a scale-down takes first.
		{"scale-down deletes the claims itself, mounted or not", scaleDownDeletesClaims, false, true, true, false, []string{invMounted}},
		// Off nodes this controller does the garbage collector's work; on
		// nodes its condemned pod terminates for 2 s after its delete,
		// and the controller, taking it for gone, deletes the claim it
		// still mounts: only graceful deletion shows the bug.
		{"the controller takes a terminating pod for gone, on nodes", condemnedClaimsDeletedOnceGone, false, true, true, true, []string{invMounted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var world spWorld
			if tc.audited {
				k := testenv.StartIsolatedKubernetes(t)
				c, err := createCRD(k.Config)
				if err != nil {
					t.Fatal(err)
				}
				if err := probeGC(c); err != nil {
					t.Fatal(err)
				}
				world = spWorld{direct: k.Config, ns: k.Namespace, auditLog: k.AuditLog,
					replicaConfig: func(int) (*rest.Config, *faultproxy.Proxy) { return k.Config, nil }}
				if tc.onNodes {
					k.StartNodes(t, &testenv.NodeOptions{Count: 2})
					world.storageClass = k.NewVolumePool(t, &testenv.VolumeOptions{Count: 150}).StorageClass
					world.podGrace = 2
				}
			} else {
				k := testenv.StartKubernetes(t)
				waitForGC(t)
				world = spWorld{direct: k.Config, ns: k.Namespace,
					replicaConfig: func(int) (*rest.Config, *faultproxy.Proxy) { return k.Config, nil }}
			}
			log, logPath, err := chaos.FileLogger(t, "statefulset-pvc", plantSeed)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// No faults: a deletion decided before a pod was created
			// reaches the API server within a second.
			g, err := newSPWorkload(ctx, world, spOptions{bound: 15 * time.Second, wrap: tc.wrap, blindClaimWatch: tc.blind, log: log, mountRace: time.Second}, plantSeed)
			if err != nil {
				t.Fatal(err)
			}
			duration := 12 * time.Second
			if tc.long {
				duration = 25 * time.Second
			}
			res := runSP(ctx, t, g, chaos.Config{Name: "statefulset-pvc planted: " + tc.name, Seed: plantSeed,
				Duration: duration, SettleTimeout: 15 * time.Second})
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
			if strings.HasPrefix(tc.name, "policy read as") && (found[invClaimSafety] > 0 || found[invKept] > 0) {
				t.Errorf("the planted bug %q, which the SDK now defeats, still cost claims: %v", tc.name, found)
			}
		})
	}
}
