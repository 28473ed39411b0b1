package plugin

import (
	"errors"
	"fmt"
	"maps"
	"slices"
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
	var all bool
	cmd := &cobra.Command{
		Use:   "backups GROUP",
		Short: "Preview a retention policy over a group of backups: what it keeps and why, what is deletable and when",
		Long: `Evaluate a retention policy (package retention, restic's notation) over the
backups of a group, as backupstore/collect does, and say for each backup
whether the policy keeps it and why (retention.Explain: "last snapshot",
"daily snapshot", "newest successful (guard)", …), which are deletable now,
and when the next one becomes deletable. It reads; it deletes nothing.
The backups are the objects of --resource whose --group-label is GROUP.
With -A, the group of each namespace that has one is evaluated alone.`,
		Example: fmt.Sprintf(`  %[1]s backups db-a --resource etcdbackups.backup.example.com --group-label backup.example.com/cluster \
      --policy last=3,daily=7,weekly=4 --time-field status.completionTime --outcome-field status.phase
  %[1]s backups db-a -A --resource etcdbackups.backup.example.com --group-label backup.example.com/cluster --policy last=3`, e.name),
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
			ns, where := metav1.NamespaceAll, "all namespaces"
			if !all {
				if ns, err = e.namespace(); err != nil {
					return err
				}
				where = ns
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
				return fmt.Errorf("list %s in %s: %w", gvr.Resource, where, err)
			}
			// A group is named in a namespace: db-a of one namespace is
			// not db-a of another, and each is evaluated alone.
			byNS := map[string][]retention.Item{}
			if !all {
				byNS[ns] = []retention.Item{}
			}
			for i := range l.Items {
				it, err := backupItem(&l.Items[i], args[0], timeField, outcomeField)
				if err != nil {
					return err
				}
				byNS[l.Items[i].GetNamespace()] = append(byNS[l.Items[i].GetNamespace()], it)
			}
			var views []BackupsView
			for _, ns := range slices.Sorted(maps.Keys(byNS)) {
				v, err := preview(p, byNS[ns], e.clock.Now())
				if err != nil {
					return err
				}
				v.Group, v.Namespace = args[0], ns
				views = append(views, v)
			}
			return printBackups(e, out, views, all)
		},
	}
	out = addOutput(cmd)
	addAllNamespaces(cmd, &all)
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

// printBackups prints the preview of one namespace, or with all of every
// namespace that has backups of the group.
func printBackups(e *env, out *output, views []BackupsView, all bool) error {
	w := e.streams.Out
	if out.structured() {
		return printViews(out, w, "RetentionPreview", views, all, func(v BackupsView) (string, string) { return v.Namespace, v.Group })
	}
	if all && len(views) == 0 {
		_, err := fmt.Fprintln(w, "No backups of the group found in any namespace.")
		return err
	}
	now := e.clock.Now()
	t := &metav1.Table{ColumnDefinitions: columnsIn(all, "NAME", "TIME", "OUTCOME", "DECISION", "WHY", "DELETABLE")}
	deletable := make([]int, len(views))
	for i, v := range views {
		for _, b := range v.Backups {
			decision, why, when := "delete", "-", "now"
			if b.Keep {
				decision, why, when = "keep", strings.Join(b.Reasons, ", "), "-"
				if !b.DeletableAt.IsZero() {
					when = "in " + human(b.DeletableAt.Sub(now))
				}
			} else {
				deletable[i]++
			}
			t.Rows = append(t.Rows, rowIn(all, v.Namespace, b.Name, stamp(b.Time), b.Outcome, decision, why, when))
		}
	}
	if err := out.print(w, "", "", "", nil, t); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for i, v := range views {
		in := ""
		if all {
			in = " in " + v.Namespace
		}
		next := "no backup becomes deletable by time alone"
		if !v.Next.IsZero() {
			next = fmt.Sprintf("the next becomes deletable at %s (in %s)", stamp(v.Next), human(v.Next.Sub(now)))
		}
		if _, err := fmt.Fprintf(w, "policy %s%s: %d of %d deletable now; %s\n", v.Policy, in, deletable[i], len(v.Backups), next); err != nil {
			return err
		}
	}
	return nil
}
