package plugin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/kubelock"
)

// readerID is the lock ID of this command's handle on a lock. The command
// never takes the lock: it reads the record, the deny list and the
// pending upgrades, and changes the deny list.
const readerID = "kubectl-groundskeeper"

// LockView is what lock prints with -o json or yaml.
type LockView struct {
	// ConfigMap is the ConfigMap that holds the lock, in Namespace.
	ConfigMap string `json:"configMap"`
	Namespace string `json:"-"`
	// Held reports that a record exists; Holder, Start and End are the
	// record, decoded from its tuple format.
	Held   bool      `json:"held"`
	Holder string    `json:"holder,omitempty"`
	Start  time.Time `json:"start,omitzero"`
	End    time.Time `json:"end,omitzero"`
	// Expired reports that End has passed: another instance may take the
	// lock over.
	Expired bool `json:"expired,omitempty"`
	// TimeLeft is End minus now, in seconds; negative once expired.
	TimeLeft int64 `json:"timeLeftSeconds,omitempty"`
	// DenyList are the lock IDs refused the lock.
	DenyList []string `json:"denyList"`
	// PendingUpgrades are the process groups recorded ready for an upgrade.
	PendingUpgrades []PendingUpgrade `json:"pendingUpgrades"`
}

// PendingUpgrade is a process group recorded ready for an upgrade to
// Version (locking.PendingUpgrade).
type PendingUpgrade struct {
	Version        string `json:"version"`
	ProcessGroupID string `json:"processGroupID"`
}

type lockFlags struct {
	configMap, prefix string
}

func (f *lockFlags) add(cmd *cobra.Command, e *env) {
	cmd.Flags().StringVar(&f.configMap, "configmap", e.opts.LockName, "the ConfigMap that holds the lock (kubelock), in the namespace of -n")
	cmd.Flags().StringVar(&f.prefix, "prefix", e.opts.LockPrefix, "the lock's key prefix (default: the FoundationDB operator's)")
}

// open returns a handle on the lock named by the flags.
func (f *lockFlags) open(e *env) (l *locking.Lock, ns string, err error) {
	if f.configMap == "" {
		return nil, "", usageError{errors.New("--configmap: name the ConfigMap that holds the lock")}
	}
	if ns, err = e.namespace(); err != nil {
		return nil, "", err
	}
	kc, _, err := e.clients()
	if err != nil {
		return nil, "", err
	}
	l, err = openLock(kc, ns, f.configMap, f.prefix)
	return l, ns, err
}

func openLock(kc kubernetes.Interface, ns, name, prefix string) (*locking.Lock, error) {
	b, err := kubelock.New(kubelock.Config{Client: kubelock.ClientGo(kc.CoreV1()), Namespace: ns, Name: name})
	if err != nil {
		return nil, fmt.Errorf("lock ConfigMap %s/%s: %w", ns, name, err)
	}
	l, err := locking.New(locking.Config{Backend: b, LockID: readerID, Prefix: prefix})
	if err != nil {
		return nil, fmt.Errorf("lock ConfigMap %s/%s: %w", ns, name, err)
	}
	return l, nil
}

func readLock(ctx context.Context, l *locking.Lock, ns, name string, now time.Time) (LockView, error) {
	v := LockView{ConfigMap: name, Namespace: ns, DenyList: []string{}, PendingUpgrades: []PendingUpgrade{}}
	ref := ns + "/" + name
	rec, ok, err := l.Holder(ctx)
	if err != nil {
		return v, fmt.Errorf("lock ConfigMap %s: %w", ref, err)
	}
	if ok {
		v.Held, v.Holder, v.Start, v.End = true, rec.Holder, rec.Start.UTC(), rec.End.UTC()
		v.TimeLeft = int64(rec.End.Sub(now).Round(time.Second) / time.Second)
		v.Expired = !now.Before(rec.End)
	}
	deny, err := l.DenyList(ctx)
	if err != nil {
		return v, fmt.Errorf("lock ConfigMap %s: %w", ref, err)
	}
	v.DenyList = append(v.DenyList, deny...)
	// A dry run of the clear is the one read of every version's records.
	up, err := l.ClearPendingUpgrades(ctx, &locking.ClearUpgradesOptions{DryRun: true})
	if err != nil {
		return v, fmt.Errorf("lock ConfigMap %s: %w", ref, err)
	}
	for _, p := range up {
		v.PendingUpgrades = append(v.PendingUpgrades, PendingUpgrade(p))
	}
	return v, nil
}

func newLock(e *env) *cobra.Command {
	var f lockFlags
	var out *output
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Show the operator lock: holder, start, end, time left, deny list, pending upgrades",
		Long: `Show the global operator lock (package locking) kept in a ConfigMap (locking/kubelock):
the instance that holds it, since when and until when, the time left, the
instances on the deny list and the process groups with a pending upgrade.
The record is decoded from its FoundationDB tuple format; a record that is
not one is an error naming the key and the value.`,
		Example: fmt.Sprintf(`  %[1]s lock --configmap my-operator-lock -n operators
  %[1]s lock --configmap my-operator-lock -n operators -o json
  %[1]s lock deny operator-7f9c --configmap my-operator-lock -n operators --yes`, e.name),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			l, ns, err := f.open(e)
			if err != nil {
				return err
			}
			v, err := readLock(cmd.Context(), l, ns, f.configMap, e.clock.Now())
			if err != nil {
				return err
			}
			return printLock(e, out, v)
		},
	}
	f.add(cmd, e)
	out = addOutput(cmd)
	cmd.AddCommand(newDeny(e, false), newDeny(e, true))
	return cmd
}

func printLock(e *env, out *output, v LockView) error {
	w := e.streams.Out
	if out.structured() {
		return out.print(w, "Lock", v.Namespace, v.ConfigMap, v, nil)
	}
	t := &metav1.Table{ColumnDefinitions: columns("LOCK", "HOLDER", "START", "END", "TIME LEFT")}
	switch {
	case !v.Held:
		t.Rows = append(t.Rows, row(v.ConfigMap, "<none>", "-", "-", "-"))
	default:
		left := human(time.Duration(v.TimeLeft) * time.Second)
		if v.Expired {
			left = "expired " + human(-time.Duration(v.TimeLeft)*time.Second) + " ago"
		}
		t.Rows = append(t.Rows, row(v.ConfigMap, v.Holder, stamp(v.Start), stamp(v.End), left))
	}
	if err := out.print(w, "", "", "", nil, t); err != nil {
		return err
	}
	fmt.Fprintln(w)
	deny := &metav1.Table{ColumnDefinitions: columns("DENIED")}
	for _, id := range v.DenyList {
		deny.Rows = append(deny.Rows, row(id))
	}
	if len(v.DenyList) == 0 {
		deny.Rows = append(deny.Rows, row("<none>"))
	}
	if err := out.print(w, "", "", "", nil, deny); err != nil {
		return err
	}
	fmt.Fprintln(w)
	up := &metav1.Table{ColumnDefinitions: columns("UPGRADE TO", "PROCESS GROUP")}
	for _, p := range v.PendingUpgrades {
		up.Rows = append(up.Rows, row(p.Version, p.ProcessGroupID))
	}
	if len(v.PendingUpgrades) == 0 {
		up.Rows = append(up.Rows, row("<none>", "-"))
	}
	return out.print(w, "", "", "", nil, up)
}

// newDeny is lock deny (allow false) or lock allow (allow true).
func newDeny(e *env, allow bool) *cobra.Command {
	var f lockFlags
	var yes bool
	verb, what := "deny", "add %s to the deny list: it will be refused the lock"
	if allow {
		verb, what = "allow", "remove %s from the deny list: it may take the lock again"
	}
	cmd := &cobra.Command{
		Use:   verb + " LOCK_ID",
		Short: fmt.Sprintf("%s an instance the lock (dry run unless --yes or confirmed)", verb),
		Example: fmt.Sprintf(`  # See what it would change
  %[1]s lock %[2]s operator-7f9c --configmap my-operator-lock -n operators
  # Change it
  %[1]s lock %[2]s operator-7f9c --configmap my-operator-lock -n operators --yes`, e.name, verb),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			l, ns, err := f.open(e)
			if err != nil {
				return err
			}
			ref := ns + "/" + f.configMap
			entries := []locking.DenyListEntry{{ID: id, Allow: allow}}
			plan, err := l.UpdateDenyList(cmd.Context(), entries, &locking.DenyListOptions{DryRun: true})
			if err != nil {
				return fmt.Errorf("lock ConfigMap %s: %w", ref, err)
			}
			w := e.streams.Out
			if len(plan) == 0 {
				state := "not on the deny list"
				if !allow {
					state = "on the deny list already"
				}
				fmt.Fprintf(w, "lock %s: %s is %s: nothing to do\n", ref, id, state)
				return nil
			}
			fmt.Fprintf(w, "lock %s: "+what+"\n", ref, id)
			if !yes {
				ok, err := e.confirm(fmt.Sprintf("%s %s?", verb, id))
				if err != nil {
					return err
				}
				if !ok {
					fmt.Fprintf(w, "dry run: nothing changed (run with --yes to %s %s)\n", verb, id)
					return nil
				}
			}
			done, err := l.UpdateDenyList(cmd.Context(), entries, nil)
			if err != nil {
				return fmt.Errorf("lock ConfigMap %s: %w", ref, err)
			}
			if len(done) == 0 {
				fmt.Fprintf(w, "lock %s: %s changed meanwhile: nothing to do\n", ref, id)
				return nil
			}
			verbed := "denied"
			if allow {
				verbed = "allowed"
			}
			fmt.Fprintf(w, "lock %s: %s %s\n", ref, id, verbed)
			return nil
		},
	}
	f.add(cmd, e)
	cmd.Flags().BoolVar(&yes, "yes", false, "make the change without asking (otherwise a dry run, or a question on a terminal)")
	return cmd
}
