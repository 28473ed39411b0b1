package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/kubelock"
)

// readerID is the lock ID of this command's handle on a lock. The command
// never takes the lock: it reads the record, the deny list and the
// pending upgrades, and changes the deny list.
const readerID = "kubectl-groundskeeper"

// LockView is what lock prints with -o json or yaml.
type LockView struct {
	// ConfigMap is the ConfigMap that holds the lock, in Namespace
	// (kubelock); empty for a lock in etcd.
	ConfigMap string `json:"configMap,omitempty"`
	Namespace string `json:"-"`
	// EtcdEndpoints and EtcdPrefix name a lock in etcd (etcdlock): its
	// keys are EtcdPrefix followed by the lock's own keys.
	EtcdEndpoints []string `json:"etcdEndpoints,omitempty"`
	EtcdPrefix    string   `json:"etcdPrefix,omitempty"`
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
	etcd              etcdFlags
}

func (f *lockFlags) add(cmd *cobra.Command, e *env) {
	cmd.Flags().StringVar(&f.configMap, "configmap", e.opts.LockName, "the ConfigMap that holds the lock (kubelock), in the namespace of -n")
	cmd.Flags().StringVar(&f.prefix, "prefix", e.opts.LockPrefix, "the lock's key prefix (default: the FoundationDB operator's)")
	f.etcd.add(cmd)
}

// lockHandle is the command's handle on a lock, in a ConfigMap or in etcd.
type lockHandle struct {
	lock *locking.Lock
	// ref names the lock in errors ("ConfigMap ns/name", "etcd prefix
	// \"/p/\""), short in what lock deny and allow print ("ns/name",
	// "etcd:/p/").
	ref, short string
	// view is the view with the lock's name filled in.
	view LockView
	// changes starts a watch of every key of the lock, and returns a
	// channel that receives nil after each change, and the error that
	// ended the watch, if any, before it is closed; the changes made after
	// changes returned are all signalled.
	changes func(ctx context.Context) (<-chan error, error)
	close   func()
}

// open returns a handle on the lock named by the flags: in etcd when
// --etcd-endpoints is given, else in the ConfigMap of --configmap.
func (f *lockFlags) open(cmd *cobra.Command, e *env) (*lockHandle, error) {
	if len(f.etcd.endpoints) > 0 {
		if cmd.Flags().Changed("configmap") {
			return nil, usageError{fmt.Errorf("--configmap %s and --etcd-endpoints %s: name one lock, in a ConfigMap or in etcd", f.configMap, strings.Join(f.etcd.endpoints, ","))}
		}
		return f.etcd.open(cmd.Context(), f.prefix)
	}
	if f.configMap == "" {
		return nil, usageError{errors.New("--configmap: name the ConfigMap that holds the lock (or --etcd-endpoints for a lock in etcd)")}
	}
	ns, err := e.namespace()
	if err != nil {
		return nil, err
	}
	kc, _, err := e.clients()
	if err != nil {
		return nil, err
	}
	l, err := openLock(kc, ns, f.configMap, f.prefix)
	if err != nil {
		return nil, err
	}
	cms, name := kc.CoreV1().ConfigMaps(ns), f.configMap
	return &lockHandle{
		lock: l, ref: "ConfigMap " + ns + "/" + name, short: ns + "/" + name,
		view:    LockView{ConfigMap: name, Namespace: ns},
		changes: func(ctx context.Context) (<-chan error, error) { return watchConfigMap(ctx, cms, name) },
		close:   func() {},
	}, nil
}

// watchConfigMap watches the ConfigMap name, from the resourceVersion of a
// list made before it returns, so that no later change is missed; it
// resumes after the API server ends a watch (watchtools.RetryWatcher).
func watchConfigMap(ctx context.Context, cms typedcorev1.ConfigMapInterface, name string) (<-chan error, error) {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	l, err := cms.List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.FieldSelector = sel
		return cms.Watch(ctx, o)
	}}
	return notifyChanges(ctx, l.ResourceVersion, lw)
}

// notifyChanges watches lw from resourceVersion rv (that of a list made
// before it is called, so that no later change is missed) and sends nil on
// the returned channel after each change, at most one pending; it resumes
// after the API server ends a watch (watchtools.RetryWatcher), and closes
// the channel when the watch ends for good or ctx ends.
func notifyChanges(ctx context.Context, rv string, lw cache.WatcherWithContext) (<-chan error, error) {
	w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, lw)
	if err != nil {
		return nil, err
	}
	ch := make(chan error, 1)
	go func() {
		defer close(ch)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				if ev.Type == watch.Error {
					continue // the RetryWatcher resumes, or ends its channel
				}
				select {
				case ch <- nil:
				default: // a reread is pending already
				}
			}
		}
	}()
	return ch, nil
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

func readLock(ctx context.Context, h *lockHandle, now time.Time) (LockView, error) {
	l, v := h.lock, h.view
	v.DenyList, v.PendingUpgrades = []string{}, []PendingUpgrade{}
	rec, ok, err := l.Holder(ctx)
	if err != nil {
		return v, fmt.Errorf("lock %s: %w", h.ref, err)
	}
	if ok {
		v.Held, v.Holder, v.Start, v.End = true, rec.Holder, rec.Start.UTC(), rec.End.UTC()
		v.TimeLeft = int64(rec.End.Sub(now).Round(time.Second) / time.Second)
		v.Expired = !now.Before(rec.End)
	}
	deny, err := l.DenyList(ctx)
	if err != nil {
		return v, fmt.Errorf("lock %s: %w", h.ref, err)
	}
	v.DenyList = append(v.DenyList, deny...)
	// A dry run of the clear is the one read of every version's records.
	up, err := l.ClearPendingUpgrades(ctx, &locking.ClearUpgradesOptions{DryRun: true})
	if err != nil {
		return v, fmt.Errorf("lock %s: %w", h.ref, err)
	}
	for _, p := range up {
		v.PendingUpgrades = append(v.PendingUpgrades, PendingUpgrade(p))
	}
	return v, nil
}

// sameLock reports whether a and b show one state of the lock: the record,
// the deny list and the pending upgrades (not the time left).
func sameLock(a, b LockView) bool {
	return a.Held == b.Held && a.Holder == b.Holder && a.Start.Equal(b.Start) && a.End.Equal(b.End) &&
		slices.Equal(a.DenyList, b.DenyList) && slices.Equal(a.PendingUpgrades, b.PendingUpgrades)
}

// watchLock prints the lock, then again after each change of its record,
// deny list or pending upgrades, until ctx ends (Ctrl-C) or the watch
// fails. It reads the lock again after each change the watch reports, and
// prints only what differs from what it printed last.
func watchLock(ctx context.Context, e *env, out *output, h *lockHandle) error {
	changes, err := h.changes(ctx)
	if err != nil {
		return fmt.Errorf("lock %s: watch: %w", h.ref, err)
	}
	return watchPrint(ctx, e, out, "lock "+h.ref, changes,
		func(ctx context.Context) (LockView, error) { return readLock(ctx, h, e.clock.Now()) },
		sameLock,
		func(v LockView) error { return printLock(e, out, v) })
}

// watchPrint prints what read returns, then reads again after each change
// that changes reports, and prints what it read when it differs (same)
// from what it printed last, until ctx ends (Ctrl-C) or the watch fails;
// what names the watched thing in errors.
func watchPrint[V any](ctx context.Context, e *env, out *output, what string, changes <-chan error,
	read func(context.Context) (V, error), same func(a, b V) bool, print func(V) error) error {
	var last V
	for first := true; ; first = false {
		v, err := read(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
		if first || !same(v, last) {
			if !first && !out.structured() {
				fmt.Fprintln(e.streams.Out)
			}
			if err := print(v); err != nil {
				return err
			}
			last = v
		}
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-changes:
			switch {
			case ctx.Err() != nil:
				return nil
			case err != nil:
				return fmt.Errorf("%s: watch: %w", what, err)
			case !ok:
				return fmt.Errorf("%s: the watch ended", what)
			}
		}
	}
}

func newLock(e *env) *cobra.Command {
	var f lockFlags
	var out *output
	var watching bool
	cmd := &cobra.Command{
		Use:   "lock",
		Short: "Show the operator lock: holder, start, end, time left, deny list, pending upgrades",
		Long: `Show the global operator lock (package locking) kept in a ConfigMap
(locking/kubelock) or in etcd (locking/etcdlock, with --etcd-endpoints):
the instance that holds it, since when and until when, the time left, the
instances on the deny list and the process groups with a pending upgrade.
The record is decoded from its FoundationDB tuple format; a record that is
not one is an error naming the key and the value. With --watch, the lock is
printed again after each change (a watch of the ConfigMap or of the lock's
etcd keys, not a timer) until Ctrl-C.`,
		Example: fmt.Sprintf(`  %[1]s lock --configmap my-operator-lock -n operators
  %[1]s lock --configmap my-operator-lock -n operators -o json
  %[1]s lock --configmap my-operator-lock -n operators --watch
  %[1]s lock --etcd-endpoints http://etcd-0:2379,http://etcd-1:2379 --etcd-prefix /my-operator/lock/
  %[1]s lock deny operator-7f9c --configmap my-operator-lock -n operators --yes`, e.name),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			h, err := f.open(cmd, e)
			if err != nil {
				return err
			}
			defer h.close()
			if watching {
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				return watchLock(ctx, e, out, h)
			}
			v, err := readLock(cmd.Context(), h, e.clock.Now())
			if err != nil {
				return err
			}
			return printLock(e, out, v)
		},
	}
	f.add(cmd, e)
	out = addOutput(cmd)
	cmd.Flags().BoolVarP(&watching, "watch", "w", false, "after printing the lock, watch it and print it again after each change of its record, deny list or pending upgrades, until interrupted")
	cmd.AddCommand(newDeny(e, false), newDeny(e, true))
	return cmd
}

func printLock(e *env, out *output, v LockView) error {
	w := e.streams.Out
	name := v.ConfigMap
	if name == "" {
		name = "etcd:" + v.EtcdPrefix
	}
	if out.structured() {
		return out.print(w, "Lock", v.Namespace, name, v, nil)
	}
	t := &metav1.Table{ColumnDefinitions: columns("LOCK", "HOLDER", "START", "END", "TIME LEFT")}
	switch {
	case !v.Held:
		t.Rows = append(t.Rows, row(name, "<none>", "-", "-", "-"))
	default:
		left := human(time.Duration(v.TimeLeft) * time.Second)
		if v.Expired {
			left = "expired " + human(-time.Duration(v.TimeLeft)*time.Second) + " ago"
		}
		t.Rows = append(t.Rows, row(name, v.Holder, stamp(v.Start), stamp(v.End), left))
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
  %[1]s lock %[2]s operator-7f9c --configmap my-operator-lock -n operators --yes
  # A lock in etcd
  %[1]s lock %[2]s operator-7f9c --etcd-endpoints http://etcd-0:2379 --etcd-prefix /my-operator/lock/ --yes`, e.name, verb),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			h, err := f.open(cmd, e)
			if err != nil {
				return err
			}
			defer h.close()
			l, ref := h.lock, h.short
			entries := []locking.DenyListEntry{{ID: id, Allow: allow}}
			plan, err := l.UpdateDenyList(cmd.Context(), entries, &locking.DenyListOptions{DryRun: true})
			if err != nil {
				return fmt.Errorf("lock %s: %w", h.ref, err)
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
				return fmt.Errorf("lock %s: %w", h.ref, err)
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
