package plugin

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// ClaimFate is what happens to one claim of a StatefulSet when it is scaled
// or deleted, by its KEP-1847 policy.
type ClaimFate struct {
	Claim   string `json:"claim"`
	Ordinal int    `json:"ordinal"`
	// Fate is "deleted" (or being deleted already) or "kept".
	Fate string `json:"fate"`
	Why  string `json:"why"`
}

// FateView is what claims fate prints with -o json or yaml.
type FateView struct {
	StatefulSet string      `json:"statefulSet"`
	Namespace   string      `json:"-"`
	Policy      string      `json:"policy"`
	Replicas    int32       `json:"replicas"`
	Action      string      `json:"action"`
	Claims      []ClaimFate `json:"claims"`
}

func newFate(e *env) *cobra.Command {
	var out *output
	var scaleTo int
	var deleteOwner bool
	cmd := &cobra.Command{
		Use:   "fate STATEFULSET (--scale-to N | --delete)",
		Short: "Predict which claims of a StatefulSet go if it is scaled to N or deleted, by its KEP-1847 policy",
		Long: `Predict, before anyone does it, what happens to each existing claim of a
StatefulSet's volumeClaimTemplates if it is scaled to N replicas or
deleted, by its persistentVolumeClaimRetentionPolicy (KEP-1847: Retain,
DeleteOnOwnerDeletionOnly, DeleteOnScaledownOnly,
DeleteOnScaledownAndOwnerDeletion; lifecycle.FromStatefulSet). It changes
nothing.`,
		Example: fmt.Sprintf(`  %[1]s claims fate db --scale-to 1 -n prod
  %[1]s claims fate db --delete -n prod -o json`, e.name),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			scaling := cmd.Flags().Changed("scale-to")
			if scaling == deleteOwner {
				return usageError{errors.New("claims fate: give one of --scale-to N and --delete")}
			}
			if scaling && scaleTo < 0 {
				return usageError{fmt.Errorf("--scale-to %d: must not be negative", scaleTo)}
			}
			name := strings.TrimPrefix(strings.TrimPrefix(args[0], "statefulset/"), "sts/")
			ns, err := e.namespace()
			if err != nil {
				return err
			}
			kc, _, err := e.clients()
			if err != nil {
				return err
			}
			sts, err := kc.AppsV1().StatefulSets(ns).Get(cmd.Context(), name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("statefulset %s/%s: %w", ns, name, err)
			}
			p, err := lifecycle.FromStatefulSet(sts.Spec.PersistentVolumeClaimRetentionPolicy)
			if err != nil {
				return fmt.Errorf("statefulset %s/%s: %w", ns, name, err)
			}
			pn, err := p.Name()
			if err != nil {
				return fmt.Errorf("statefulset %s/%s: %w", ns, name, err)
			}
			cl, err := kc.CoreV1().PersistentVolumeClaims(ns).List(cmd.Context(), metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("list claims of %s: %w", ns, err)
			}
			replicas := int32(1)
			if sts.Spec.Replicas != nil {
				replicas = *sts.Spec.Replicas
			}
			v := FateView{StatefulSet: name, Namespace: ns, Policy: string(pn), Replicas: replicas, Claims: []ClaimFate{}}
			if scaling {
				v.Action = fmt.Sprintf("scale to %d", scaleTo)
			} else {
				v.Action = "delete"
			}
			var templates []string
			for _, t := range sts.Spec.VolumeClaimTemplates {
				templates = append(templates, t.Name)
			}
			v.Claims = fates(templates, name, cl.Items, p, scaling, int32(scaleTo), replicas)
			return printFate(e, out, v)
		},
	}
	out = addOutput(cmd)
	cmd.Flags().IntVar(&scaleTo, "scale-to", 0, "predict a scale to this many replicas")
	cmd.Flags().BoolVar(&deleteOwner, "delete", false, "predict the StatefulSet's deletion (cascading)")
	return cmd
}

// fates decides, by the StatefulSet controller's rules, the fate of each
// claim named <template>-<statefulset>-<ordinal>.
func fates(templates []string, sts string, claims []corev1.PersistentVolumeClaim, p lifecycle.Policy, scaling bool, to, replicas int32) []ClaimFate {
	var out []ClaimFate
	for _, c := range claims {
		for _, t := range templates {
			rest, ok := strings.CutPrefix(c.Name, t+"-"+sts+"-")
			if !ok {
				continue
			}
			ord, err := strconv.Atoi(rest)
			if err != nil || ord < 0 || strconv.Itoa(ord) != rest {
				continue
			}
			f := ClaimFate{Claim: c.Name, Ordinal: ord, Fate: "kept"}
			switch {
			case c.DeletionTimestamp != nil:
				f.Fate, f.Why = "deleted", "being deleted already"
			case !scaling && p.DeletesOnOwnerDeletion():
				f.Fate, f.Why = "deleted", "whenDeleted=Delete: owned by the StatefulSet, deleted with it"
			case !scaling:
				f.Why = "whenDeleted=Retain"
			case int32(ord) < to:
				f.Why = fmt.Sprintf("ordinal %d stays (< %d)", ord, to)
			case int32(ord) >= replicas:
				f.Why = fmt.Sprintf("ordinal %d has no pod now (>= %d replicas): a scale-down condemns no pod of it", ord, replicas)
			case p.DeletesOnScaledown():
				f.Fate, f.Why = "deleted", fmt.Sprintf("whenScaled=Delete: pod %s-%d is removed, its claim with it", sts, ord)
			default:
				f.Why = fmt.Sprintf("whenScaled=Retain: pod %s-%d is removed, its claim kept for a scale-up", sts, ord)
			}
			out = append(out, f)
		}
	}
	if out == nil {
		out = []ClaimFate{}
	}
	return out
}

func printFate(e *env, out *output, v FateView) error {
	w := e.streams.Out
	if out.structured() {
		return out.print(w, "ClaimFates", v.Namespace, v.StatefulSet, v, nil)
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
	_, err := fmt.Fprintf(w, "\nstatefulset %s (%d replicas, policy %s): %s deletes %d of %d claims\n", v.StatefulSet, v.Replicas, v.Policy, v.Action, n, len(v.Claims))
	return err
}
