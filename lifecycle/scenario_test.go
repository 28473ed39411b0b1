package lifecycle_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/testenv"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

type step struct {
	name string
	do   func(ctx context.Context, w workload, p lifecycle.Policy) error
}

func scaleTo(n int) step {
	return step{fmt.Sprintf("scale to %d", n), func(ctx context.Context, w workload, _ lifecycle.Policy) error { return w.scale(ctx, n) }}
}

func deletePods(ordinals ...int) step {
	return step{fmt.Sprintf("delete pods %v", ordinals), func(ctx context.Context, w workload, _ lifecycle.Policy) error {
		for _, i := range ordinals {
			if err := w.deletePod(ctx, i); err != nil {
				return err
			}
		}
		return nil
	}}
}

func deleteOwner(p metav1.DeletionPropagation) step {
	return step{"delete owner " + string(p), func(ctx context.Context, w workload, _ lifecycle.Policy) error { return w.deleteOwner(ctx, p) }}
}

func setPolicy(name string, f func(lifecycle.Policy) lifecycle.Policy) step {
	return step{"set policy " + name, func(ctx context.Context, w workload, p lifecycle.Policy) error { return w.setPolicy(ctx, f(p)) }}
}

var retain = lifecycle.Policy{WhenDeleted: lifecycle.ActionRetain, WhenScaled: lifecycle.ActionRetain}

func toRetain(lifecycle.Policy) lifecycle.Policy   { return retain }
func toPolicy(p lifecycle.Policy) lifecycle.Policy { return p }

// want builds the expected final snapshot.
type want struct {
	claims []claimView
	pods   []int
}

func (w want) String() string { return snapshot{Claims: w.claims, Pods: w.pods}.String() }

// refsInRange are the references of the claim of a pod in range.
func refsInRange(p lifecycle.Policy) string {
	if p.DeletesOnOwnerDeletion() {
		return "Owner+ctl+block"
	}
	return ""
}

type scenario struct {
	name    string
	initial func(lifecycle.Policy) lifecycle.Policy
	steps   []step
	want    func(p lifecycle.Policy) want
}

// The KEP-1847 test plan, for two pods (the seed, "Test Plan"). "Add data to
// the PV, confirm the PV is empty" becomes "the claim is fresh": there is no
// kubelet, and a claim with another UID is a new volume.
var scenarios = []scenario{
	{
		name:  "scale 2 to 1 then back to 2",
		steps: []step{scaleTo(1), scaleTo(2)},
		want: func(p lifecycle.Policy) want {
			return want{claims: []claimView{{Ordinal: 0, Refs: refsInRange(p)}, {Ordinal: 1, Refs: refsInRange(p), Fresh: p.DeletesOnScaledown()}}, pods: []int{0, 1}}
		},
	},
	{
		name:  "delete owner",
		steps: []step{deleteOwner(metav1.DeletePropagationBackground)},
		want: func(p lifecycle.Policy) want {
			if p.DeletesOnOwnerDeletion() {
				return want{}
			}
			return want{claims: []claimView{{Ordinal: 0}, {Ordinal: 1}}}
		},
	},
	{
		name:  "manual deletion of one pod, of all pods, rolling restart",
		steps: []step{deletePods(1), deletePods(0, 1), deletePods(1), deletePods(0)},
		want: func(p lifecycle.Policy) want {
			return want{claims: []claimView{{Ordinal: 0, Refs: refsInRange(p)}, {Ordinal: 1, Refs: refsInRange(p)}}, pods: []int{0, 1}}
		},
	},
	{
		name:  "manual deletion of one pod then scale 2 to 1 and back to 2",
		steps: []step{deletePods(1), scaleTo(1), scaleTo(2)},
		want: func(p lifecycle.Policy) want {
			return want{claims: []claimView{{Ordinal: 0, Refs: refsInRange(p)}, {Ordinal: 1, Refs: refsInRange(p), Fresh: p.DeletesOnScaledown()}}, pods: []int{0, 1}}
		},
	},
	{
		name:  "non-cascading deletion of the owner",
		steps: []step{deleteOwner(metav1.DeletePropagationOrphan)},
		want: func(p lifecycle.Policy) want {
			return want{claims: []claimView{{Ordinal: 0}, {Ordinal: 1}}, pods: []int{0, 1}}
		},
	},
	{
		name:  "policy changed to Retain then owner deleted",
		steps: []step{setPolicy("Retain", toRetain), deleteOwner(metav1.DeletePropagationBackground)},
		want: func(p lifecycle.Policy) want {
			return want{claims: []claimView{{Ordinal: 0}, {Ordinal: 1}}}
		},
	},
	{
		name:    "policy changed from Retain then scale 2 to 1 then owner deleted",
		initial: toRetain,
		steps:   []step{setPolicy("from Retain", toPolicy), scaleTo(1), deleteOwner(metav1.DeletePropagationBackground)},
		want: func(p lifecycle.Policy) want {
			var w want
			if !p.DeletesOnOwnerDeletion() {
				w.claims = append(w.claims, claimView{Ordinal: 0})
				if !p.DeletesOnScaledown() {
					w.claims = append(w.claims, claimView{Ordinal: 1})
				}
			}
			return w
		},
	},
}

var policyNames = []lifecycle.Name{lifecycle.Retain, lifecycle.DeleteOnOwnerDeletionOnly, lifecycle.DeleteOnScaledownOnly, lifecycle.DeleteOnScaledownAndOwnerDeletion}

const quiet = 2 * time.Second

// run creates two pods under the scenario's initial policy, then runs its
// steps, settling after each; it returns the snapshot after every step.
func (sc scenario) run(ctx context.Context, w workload, p lifecycle.Policy) ([]snapshot, error) {
	initial := p
	if sc.initial != nil {
		initial = sc.initial(p)
	}
	if err := w.create(ctx, 2, initial); err != nil {
		return nil, fmt.Errorf("create: %w", err)
	}
	s, err := settle(ctx, w, quiet)
	if err != nil {
		return nil, fmt.Errorf("create: %w", err)
	}
	out := []snapshot{s}
	for _, st := range sc.steps {
		if err := st.do(ctx, w, p); err != nil {
			return out, fmt.Errorf("%s: %w", st.name, err)
		}
		s, err := settle(ctx, w, quiet)
		if err != nil {
			return out, fmt.Errorf("%s: %w", st.name, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// TestScenarios runs the KEP-1847 test plan for a custom owner kind driven
// by lifecycle under each of the four policies (an operator that calls
// CheckReuse, SyncOwner and deletes pods itself, and one that makes one
// SyncSet call per step), and the same scenario with a real StatefulSet in
// the controller manager: all must end as the KEP says, and agree after
// every step on which claims exist, which are fresh, and
// their owner references (the owner, the pod, controller and
// blockOwnerDeletion).
func TestScenarios(t *testing.T) {
	testenv.StartKubernetes(t) // skip early when the control plane is not built
	runScenarios(t, func(*testing.T, *testenv.Kubernetes) specs { return specs{} })
}

// TestScenariosOnNodes is TestScenarios with pods that live: scheduled to
// fake nodes (shared by every scenario: none stops one) and Running,
// claims bound to volumes when their pod is scheduled, and every deleted
// pod Terminating for 2 s, its claim mounted, as the StatefulSet controller
// and the garbage collector see it in a cluster.
func TestScenariosOnNodes(t *testing.T) {
	k := testenv.StartKubernetes(t)
	nodes := k.StartNodes(t, &testenv.NodeOptions{Count: 2})
	runScenarios(t, func(t *testing.T, env *testenv.Kubernetes) specs {
		env.UseNodes(t, nodes)
		pool := env.NewVolumePool(t, &testenv.VolumeOptions{Count: 8})
		return specs{class: &pool.StorageClass, grace: ptr.To[int64](2)}
	})
}

// runScenarios runs every scenario under every policy, each workload in a
// namespace of its own, whose pods and claims are as specsFor makes them.
func runScenarios(t *testing.T, specsFor func(*testing.T, *testenv.Kubernetes) specs) {
	for _, name := range policyNames {
		for _, sc := range scenarios {
			t.Run(string(name)+"/"+sc.name, func(t *testing.T) {
				t.Parallel()
				p, err := name.Policy()
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				stsEnv := testenv.StartKubernetes(t)
				opEnv := testenv.StartKubernetes(t)
				csEnv := testenv.StartKubernetes(t)
				m, err := lifecycle.New(lifecycle.Config{Client: lifecycle.ClientGo(opEnv.Client.CoreV1())})
				if err != nil {
					t.Fatal(err)
				}
				sts := newStatefulSet(stsEnv.Client, stsEnv.Namespace, "db")
				sts.specs = specsFor(t, stsEnv)
				op := newOperator(opEnv.Client, m, configMapOwner{opEnv.Client}, opEnv.Namespace, "db")
				op.specs = specsFor(t, opEnv)
				cs := newClaimSetOperator(csEnv.Client, newManager(t, csEnv), csEnv.Namespace, "db")
				cs.specs = specsFor(t, csEnv)
				cs.owner.specs = cs.specs
				impls := []struct {
					name string
					w    workload
				}{
					{"StatefulSet controller", sts},
					{"custom owner with lifecycle", op},
					{"custom owner with lifecycle's claim set", cs},
				}
				results := make([][]snapshot, len(impls))
				errs := make([]error, len(impls))
				var wg sync.WaitGroup
				for i, impl := range impls {
					wg.Go(func() { results[i], errs[i] = sc.run(ctx, impl.w, p) })
				}
				wg.Wait()
				for i, impl := range impls {
					if errs[i] != nil {
						t.Fatalf("%s: %v", impl.name, errs[i])
					}
				}
				wantFinal := sc.want(p).String()
				for i, impl := range impls {
					if got := results[i][len(results[i])-1].String(); got != wantFinal {
						t.Errorf("%s ends with\n  %s\nwant\n  %s", impl.name, got, wantFinal)
					}
				}
				for i, impl := range impls[1:] {
					var lib, sts []string
					for j := range results[0] {
						lib = append(lib, results[i+1][j].String())
						sts = append(sts, results[0][j].String())
					}
					if strings.Join(lib, "\n") != strings.Join(sts, "\n") {
						t.Errorf("%s and the StatefulSet controller differ:\n%s", impl.name, diffSteps(sc, lib, sts))
					}
				}
			})
		}
	}
}

func diffSteps(sc scenario, lib, sts []string) string {
	var b strings.Builder
	for i := range lib {
		name := "create"
		if i > 0 {
			name = sc.steps[i-1].name
		}
		mark := "  "
		if lib[i] != sts[i] {
			mark = "! "
		}
		fmt.Fprintf(&b, "%safter %s:\n      lifecycle:   %s\n      statefulset: %s\n", mark, name, lib[i], sts[i])
	}
	return b.String()
}
