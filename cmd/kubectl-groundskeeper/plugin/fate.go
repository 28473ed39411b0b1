package plugin

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// ClaimFate is what happens to one claim of a StatefulSet, or of another
// owner's claim set, when the owner is scaled or deleted, by its KEP-1847
// policy.
type ClaimFate struct {
	Claim string `json:"claim"`
	// Ordinal is the ordinal of the pod the claim belongs to; -1 when no
	// pod of a custom owner's set says (none mounts it, nor owns it).
	Ordinal int `json:"ordinal"`
	// Fate is "deleted" (or being deleted already) or "kept".
	Fate string `json:"fate"`
	Why  string `json:"why"`
}

// FateView is what claims fate prints with -o json or yaml.
type FateView struct {
	// StatefulSet names a StatefulSet owner; Owner another owner, as
	// RESOURCE/NAME (lifecycle.ClaimSet's owner, of any kind).
	StatefulSet string      `json:"statefulSet,omitempty"`
	Owner       string      `json:"owner,omitempty"`
	Namespace   string      `json:"-"`
	Policy      string      `json:"policy"`
	Replicas    int32       `json:"replicas"`
	Action      string      `json:"action"`
	Claims      []ClaimFate `json:"claims"`
}

// fateFlags are the flags of claims fate.
type fateFlags struct {
	scaleTo       int
	deleteOwner   bool
	setLabel      string
	replicasField string
	policyField   string
}

func newFate(e *env) *cobra.Command {
	var out *output
	var f fateFlags
	cmd := &cobra.Command{
		Use:   "fate (STATEFULSET | RESOURCE/NAME) (--scale-to N | --delete)",
		Short: "Predict which claims of a StatefulSet or a claim set go if it is scaled to N or deleted, by its KEP-1847 policy",
		Long: `Predict, before anyone does it, what happens to each existing claim of a
StatefulSet's volumeClaimTemplates if it is scaled to N replicas or
deleted, by its persistentVolumeClaimRetentionPolicy (KEP-1847: Retain,
DeleteOnOwnerDeletionOnly, DeleteOnScaledownOnly,
DeleteOnScaledownAndOwnerDeletion; lifecycle.FromStatefulSet). It changes
nothing.

An owner of another kind (RESOURCE/NAME, as kubectl names it) is a claim set
that an operator runs with lifecycle's SyncSet: its pods <name>-<ordinal>
and their claims carry the label --set-label with the owner's name as its
value, and the owner states its replicas and its policy at
--replicas-field and --policy-field (a policy shaped as a StatefulSet's:
whenDeleted, whenScaled). A claim belongs to the ordinal of the pod that
mounts it, or that owns it.`,
		Example: fmt.Sprintf(`  %[1]s claims fate db --scale-to 1 -n prod
  %[1]s claims fate db --delete -n prod -o json
  %[1]s claims fate databases.example.com/db --set-label app --scale-to 1 -n prod`, e.name),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			scaling := cmd.Flags().Changed("scale-to")
			if scaling == f.deleteOwner {
				return usageError{errors.New("claims fate: give one of --scale-to N and --delete")}
			}
			if scaling && f.scaleTo < 0 {
				return usageError{fmt.Errorf("--scale-to %d: must not be negative", f.scaleTo)}
			}
			resource, name, custom := strings.Cut(args[0], "/")
			if custom {
				switch strings.ToLower(resource) {
				case "statefulset", "statefulsets", "sts", "statefulset.apps", "statefulsets.apps":
					custom = false
				}
			} else {
				name = args[0]
			}
			if name == "" {
				return usageError{fmt.Errorf("claims fate %q: no name", args[0])}
			}
			ns, err := e.namespace()
			if err != nil {
				return err
			}
			var v FateView
			if custom {
				if f.setLabel == "" {
					return usageError{fmt.Errorf("claims fate %s: --set-label is required for an owner that is not a StatefulSet: the label whose value is the owner's name on its pods and claims (lifecycle.ClaimSet.Label)", args[0])}
				}
				v, err = customFate(cmd.Context(), e, ns, resource, name, f, scaling)
			} else {
				v, err = statefulSetFate(cmd.Context(), e, ns, name, f, scaling)
			}
			if err != nil {
				return err
			}
			return printFate(e, out, v)
		},
	}
	out = addOutput(cmd)
	cmd.Flags().IntVar(&f.scaleTo, "scale-to", 0, "predict a scale to this many replicas")
	cmd.Flags().BoolVar(&f.deleteOwner, "delete", false, "predict the owner's deletion (cascading)")
	cmd.Flags().StringVar(&f.setLabel, "set-label", "", "for an owner that is not a StatefulSet: the label whose value is the owner's name on its pods and claims")
	cmd.Flags().StringVar(&f.replicasField, "replicas-field", "spec.replicas", "for an owner that is not a StatefulSet: the field of its replicas")
	cmd.Flags().StringVar(&f.policyField, "policy-field", "spec.persistentVolumeClaimRetentionPolicy", "for an owner that is not a StatefulSet: the field of its claim retention policy (whenDeleted, whenScaled; Retain for both when absent)")
	return cmd
}

// action says what is predicted.
func (f fateFlags) action(scaling bool) string {
	if scaling {
		return fmt.Sprintf("scale to %d", f.scaleTo)
	}
	return "delete"
}

func statefulSetFate(ctx context.Context, e *env, ns, name string, f fateFlags, scaling bool) (FateView, error) {
	kc, _, err := e.clients()
	if err != nil {
		return FateView{}, err
	}
	sts, err := kc.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return FateView{}, fmt.Errorf("statefulset %s/%s: %w", ns, name, err)
	}
	p, err := lifecycle.FromStatefulSet(sts.Spec.PersistentVolumeClaimRetentionPolicy)
	if err != nil {
		return FateView{}, fmt.Errorf("statefulset %s/%s: %w", ns, name, err)
	}
	pn, err := p.Name()
	if err != nil {
		return FateView{}, fmt.Errorf("statefulset %s/%s: %w", ns, name, err)
	}
	cl, err := kc.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return FateView{}, fmt.Errorf("list claims of %s: %w", ns, err)
	}
	replicas := int32(1)
	if sts.Spec.Replicas != nil {
		replicas = *sts.Spec.Replicas
	}
	v := FateView{StatefulSet: name, Namespace: ns, Policy: string(pn), Replicas: replicas, Action: f.action(scaling)}
	var templates []string
	for _, t := range sts.Spec.VolumeClaimTemplates {
		templates = append(templates, t.Name)
	}
	v.Claims = fates(templateOrdinals(templates, name, cl.Items), name, p, scaling, int32(f.scaleTo), replicas)
	return v, nil
}

// customFate predicts the fate of the claims of a claim set whose owner is
// of another kind (lifecycle.ClaimSet).
func customFate(ctx context.Context, e *env, ns, resource, name string, f fateFlags, scaling bool) (FateView, error) {
	kc, dc, err := e.clients()
	if err != nil {
		return FateView{}, err
	}
	gvr, err := e.resolve(resource)
	if err != nil {
		return FateView{}, err
	}
	owner := gvr.GroupResource().String() + "/" + name
	u, err := dc.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return FateView{}, fmt.Errorf("%s in %s: %w", owner, ns, err)
	}
	replicas, found, err := unstructured.NestedInt64(u.Object, fieldPath(f.replicasField)...)
	if err != nil || !found {
		if err == nil {
			err = errors.New("not set")
		}
		return FateView{}, fmt.Errorf("%s: --replicas-field %s: %w", owner, f.replicasField, err)
	}
	var policy *appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy
	m, found, err := unstructured.NestedMap(u.Object, fieldPath(f.policyField)...)
	if err != nil {
		return FateView{}, fmt.Errorf("%s: --policy-field %s: %w", owner, f.policyField, err)
	}
	if found {
		policy = &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, policy); err != nil {
			return FateView{}, fmt.Errorf("%s: --policy-field %s: %w", owner, f.policyField, err)
		}
	}
	p, err := lifecycle.FromStatefulSet(policy)
	if err != nil {
		return FateView{}, fmt.Errorf("%s: --policy-field %s: %w", owner, f.policyField, err)
	}
	pn, err := p.Name()
	if err != nil {
		return FateView{}, fmt.Errorf("%s: --policy-field %s: %w", owner, f.policyField, err)
	}
	sel := metav1.ListOptions{LabelSelector: labels.Set{f.setLabel: name}.String()}
	pods, err := kc.CoreV1().Pods(ns).List(ctx, sel)
	if err != nil {
		return FateView{}, fmt.Errorf("list pods of %s: %w", owner, err)
	}
	cl, err := kc.CoreV1().PersistentVolumeClaims(ns).List(ctx, sel)
	if err != nil {
		return FateView{}, fmt.Errorf("list claims of %s: %w", owner, err)
	}
	v := FateView{Owner: owner, Namespace: ns, Policy: string(pn), Replicas: int32(replicas), Action: f.action(scaling)}
	v.Claims = fates(setOrdinals(name, pods.Items, cl.Items), name, p, scaling, int32(f.scaleTo), int32(replicas))
	return v, nil
}

// fieldPath splits a field path (spec.replicas) into its fields.
func fieldPath(s string) []string { return strings.Split(strings.TrimPrefix(s, "."), ".") }

// ordinalClaim is a claim and the ordinal of the pod it belongs to (-1:
// unknown).
type ordinalClaim struct {
	claim   *corev1.PersistentVolumeClaim
	ordinal int
}

// templateOrdinals finds the claims of a StatefulSet, named
// <template>-<statefulset>-<ordinal>.
func templateOrdinals(templates []string, sts string, claims []corev1.PersistentVolumeClaim) []ordinalClaim {
	var out []ordinalClaim
	for i := range claims {
		for _, t := range templates {
			if ord, ok := podOrdinal(sts, strings.TrimPrefix(claims[i].Name, t+"-")); ok && strings.HasPrefix(claims[i].Name, t+"-") {
				out = append(out, ordinalClaim{&claims[i], ord})
			}
		}
	}
	return out
}

// setOrdinals gives each claim of a claim set the ordinal of the pod
// <owner>-<ordinal> that mounts it, or else that owns it (whenScaled:
// Delete makes the pod its owner); -1 when none does.
func setOrdinals(owner string, pods []corev1.Pod, claims []corev1.PersistentVolumeClaim) []ordinalClaim {
	mounted := map[string]int{}
	for _, pod := range pods {
		ord, ok := podOrdinal(owner, pod.Name)
		if !ok {
			continue
		}
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim != nil {
				mounted[v.PersistentVolumeClaim.ClaimName] = ord
			}
		}
	}
	var out []ordinalClaim
	for i := range claims {
		c := &claims[i]
		ord, ok := mounted[c.Name]
		if !ok {
			ord = -1
			for _, ref := range c.OwnerReferences {
				if n, isPod := podOrdinal(owner, ref.Name); isPod && ref.Kind == "Pod" {
					ord = n
				}
			}
		}
		out = append(out, ordinalClaim{c, ord})
	}
	return out
}

// podOrdinal parses <owner>-<ordinal>.
func podOrdinal(owner, pod string) (int, bool) {
	rest, ok := strings.CutPrefix(pod, owner+"-")
	if !ok {
		return 0, false
	}
	ord, err := strconv.Atoi(rest)
	if err != nil || ord < 0 || strconv.Itoa(ord) != rest {
		return 0, false
	}
	return ord, true
}

// fates decides, by the StatefulSet controller's rules (which SyncSet
// follows), the fate of each claim of the pods <owner>-<ordinal>.
func fates(claims []ordinalClaim, owner string, p lifecycle.Policy, scaling bool, to, replicas int32) []ClaimFate {
	out := []ClaimFate{}
	for _, oc := range claims {
		c, ord := oc.claim, oc.ordinal
		f := ClaimFate{Claim: c.Name, Ordinal: ord, Fate: "kept"}
		switch {
		case c.DeletionTimestamp != nil:
			f.Fate, f.Why = "deleted", "being deleted already"
		case !scaling && p.DeletesOnOwnerDeletion():
			f.Fate, f.Why = "deleted", "whenDeleted=Delete: owned by "+owner+", deleted with it"
		case !scaling:
			f.Why = "whenDeleted=Retain"
		case ord < 0:
			f.Why = "no pod of the set mounts or owns it: a scale-down condemns no pod of it"
		case int32(ord) < to:
			f.Why = fmt.Sprintf("ordinal %d stays (< %d)", ord, to)
		case int32(ord) >= replicas:
			f.Why = fmt.Sprintf("ordinal %d has no pod now (>= %d replicas): a scale-down condemns no pod of it", ord, replicas)
		case p.DeletesOnScaledown():
			f.Fate, f.Why = "deleted", fmt.Sprintf("whenScaled=Delete: pod %s-%d is removed, its claim with it", owner, ord)
		default:
			f.Why = fmt.Sprintf("whenScaled=Retain: pod %s-%d is removed, its claim kept for a scale-up", owner, ord)
		}
		out = append(out, f)
	}
	return out
}

func printFate(e *env, out *output, v FateView) error {
	w := e.streams.Out
	if out.structured() {
		return out.print(w, "ClaimFates", v.Namespace, v.StatefulSet+v.Owner, v, nil)
	}
	t := &metav1.Table{ColumnDefinitions: columns("CLAIM", "ORDINAL", "FATE", "WHY")}
	n := 0
	for _, c := range v.Claims {
		if c.Fate == "deleted" {
			n++
		}
		t.Rows = append(t.Rows, row(c.Claim, fmt.Sprint(c.Ordinal), c.Fate, c.Why))
	}
	if err := out.print(w, "", "", "", nil, t); err != nil {
		return err
	}
	owner := "statefulset " + v.StatefulSet
	if v.Owner != "" {
		owner = v.Owner
	}
	_, err := fmt.Fprintf(w, "\n%s (%d replicas, policy %s): %s deletes %d of %d claims\n", owner, v.Replicas, v.Policy, v.Action, n, len(v.Claims))
	return err
}
