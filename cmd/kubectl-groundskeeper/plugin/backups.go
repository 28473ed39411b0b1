package plugin

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/groundskeeper-io/groundskeeper/retention"
)

// BackupView is one backup of a retention preview.
type BackupView struct {
	Name string    `json:"name"`
	Time time.Time `json:"time"`
	// Keep reports that the policy keeps it now; Reasons say why, in
	// restic's words (retention.Explain).
	Keep    bool     `json:"keep"`
	Reasons []string `json:"reasons,omitempty"`
	// DeletableAt is when a kept backup becomes deletable by time alone;
	// zero when time alone never makes it so.
	DeletableAt time.Time `json:"deletableAt,omitzero"`
	Outcome     string    `json:"outcome"`
}

// BackupsView is what backups prints with -o json or yaml.
type BackupsView struct {
	Group     string       `json:"group"`
	Namespace string       `json:"-"`
	Policy    string       `json:"policy"`
	Backups   []BackupView `json:"backups"`
	// Next is when the next decision changes by time alone.
	Next time.Time `json:"next,omitzero"`
}

func newBackups(e *env) *cobra.Command {
	var out *output
	var resourceArg, groupLabel, timeField, outcomeField, policy string
	cmd := &cobra.Command{
		Use:   "backups GROUP",
		Short: "Preview a retention policy over a group of backups: what it keeps and why, what is deletable and when",
		Long: `Evaluate a retention policy (package retention, restic's notation) over the
backups of a group, as backupstore/collect does, and say for each backup
whether the policy keeps it and why (retention.Explain: "last snapshot",
"daily snapshot", "newest successful (guard)", …), which are deletable now,
and when the next one becomes deletable. It reads; it deletes nothing.
The backups are the objects of --resource whose --group-label is GROUP.`,
		Example: fmt.Sprintf(`  %[1]s backups db-a --resource etcdbackups.backup.example.com --group-label backup.example.com/cluster \
      --policy last=3,daily=7,weekly=4 --time-field status.completionTime --outcome-field status.phase`, e.name),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if resourceArg == "" || groupLabel == "" {
				return usageError{errors.New("--resource and --group-label: name the backup resource and the label that groups its backups")}
			}
			p, err := retention.ParsePolicy(policy)
			if err != nil {
				return usageError{fmt.Errorf("--policy %q: %w", policy, err)}
			}
			ns, err := e.namespace()
			if err != nil {
				return err
			}
			_, dc, err := e.clients()
			if err != nil {
				return err
			}
			gvr, err := e.resolve(resourceArg)
			if err != nil {
				return err
			}
			sel := labels.SelectorFromSet(labels.Set{groupLabel: args[0]}).String()
			l, err := dc.Resource(gvr).Namespace(ns).List(cmd.Context(), metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				return fmt.Errorf("list %s: %w", gvr.Resource, err)
			}
			items := make([]retention.Item, len(l.Items))
			for i := range l.Items {
				if items[i], err = backupItem(&l.Items[i], args[0], timeField, outcomeField); err != nil {
					return err
				}
			}
			v, err := preview(p, items, e.clock.Now())
			if err != nil {
				return err
			}
			v.Group, v.Namespace = args[0], ns
			return printBackups(e, out, v)
		},
	}
	out = addOutput(cmd)
	cmd.Flags().StringVar(&resourceArg, "resource", e.opts.Backups, "the backup resource, as kubectl names one (etcdbackups.backup.example.com)")
	cmd.Flags().StringVar(&groupLabel, "group-label", e.opts.BackupGroupLabel, "the label whose value is the backup's group")
	cmd.Flags().StringVar(&timeField, "time-field", "metadata.creationTimestamp", "the field, dotted, with the backup's time (RFC 3339)")
	cmd.Flags().StringVar(&outcomeField, "outcome-field", "", `the field, dotted, that says "Succeeded" or "Failed"; unset: every backup's outcome is unknown, and the newest is guarded`)
	cmd.Flags().StringVar(&policy, "policy", e.opts.BackupPolicy, "the retention policy, in retention.ParsePolicy's notation (last=3,daily=7)")
	return cmd
}

func backupItem(u *unstructured.Unstructured, group, timeField, outcomeField string) (retention.Item, error) {
	it := retention.Item{ID: u.GetName(), Group: group}
	s, _, err := unstructured.NestedString(u.Object, strings.Split(timeField, ".")...)
	if err != nil || s == "" {
		return it, fmt.Errorf("backup %s: --time-field %s: no time there", u.GetName(), timeField)
	}
	if it.Time, err = time.Parse(time.RFC3339, s); err != nil {
		return it, fmt.Errorf("backup %s: --time-field %s = %q: not an RFC 3339 time", u.GetName(), timeField, s)
	}
	if outcomeField != "" {
		o, _, _ := unstructured.NestedString(u.Object, strings.Split(outcomeField, ".")...)
		switch o {
		case "Succeeded":
			it.Outcome = retention.OutcomeSucceeded
		case "Failed":
			it.Outcome = retention.OutcomeFailed
		}
	}
	return it, nil
}

// preview evaluates p over items at now and explains each decision.
func preview(p retention.Calendar, items []retention.Item, now time.Time) (BackupsView, error) {
	v := BackupsView{Policy: p.String(), Backups: []BackupView{}}
	var res retention.Result
	if err := retention.Evaluate(p, now, items, &res); err != nil {
		return v, fmt.Errorf("evaluate %s: %w", v.Policy, err)
	}
	why := map[string][]string{}
	for _, ex := range retention.Explain(p, items, &res) {
		for _, r := range ex.Reasons {
			why[r.Item.ID] = r.Matches
		}
	}
	for i, it := range items {
		d := res.Decisions[i]
		v.Backups = append(v.Backups, BackupView{Name: it.ID, Time: it.Time.UTC(), Keep: d.Keep,
			Reasons: why[it.ID], DeletableAt: d.DeletableAt.UTC(), Outcome: it.Outcome.String()})
	}
	// Newest first, as restic lists them.
	for i := 1; i < len(v.Backups); i++ {
		for j := i; j > 0 && v.Backups[j].Time.After(v.Backups[j-1].Time); j-- {
			v.Backups[j], v.Backups[j-1] = v.Backups[j-1], v.Backups[j]
		}
	}
	v.Next = res.Next.UTC()
	return v, nil
}

func printBackups(e *env, out *output, v BackupsView) error {
	w := e.streams.Out
	if out.structured() {
		return out.print(w, "RetentionPreview", v.Namespace, v.Group, v, nil)
	}
	now := e.clock.Now()
	t := &metav1.Table{ColumnDefinitions: columns("NAME", "TIME", "OUTCOME", "DECISION", "WHY", "DELETABLE")}
	deletable := 0
	for _, b := range v.Backups {
		decision, why, when := "delete", "-", "now"
		if b.Keep {
			decision, why, when = "keep", strings.Join(b.Reasons, ", "), "-"
			if !b.DeletableAt.IsZero() {
				when = "in " + human(b.DeletableAt.Sub(now))
			}
		} else {
			deletable++
		}
		t.Rows = append(t.Rows, row(b.Name, stamp(b.Time), b.Outcome, decision, why, when))
	}
	if err := out.print(w, "", "", "", nil, t); err != nil {
		return err
	}
	next := "no backup becomes deletable by time alone"
	if !v.Next.IsZero() {
		next = fmt.Sprintf("the next becomes deletable at %s (in %s)", stamp(v.Next), human(v.Next.Sub(now)))
	}
	_, err := fmt.Fprintf(w, "\npolicy %s: %d of %d deletable now; %s\n", v.Policy, deletable, len(v.Backups), next)
	return err
}
