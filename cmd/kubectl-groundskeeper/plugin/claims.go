package plugin

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/retention"
)

// ClaimView is one tracked claim as claims prints it.
type ClaimView struct {
	Name string `json:"name"`
	// Pod is the pod that last mounted it (the pod-name annotation).
	Pod string `json:"pod,omitempty"`
	// State is "mounted", "unmounted", "invalid" (its annotations do not
	// parse: never deleted on their strength) or "stale mark" (marked
	// unmounted while a pod mounts it: the collector removes the mark).
	State          string    `json:"state"`
	UnmountedSince time.Time `json:"unmountedSince,omitzero"`
	// TTL is the claim's own pvc-ttl, or the default; empty when none.
	TTL string `json:"ttl,omitempty"`
	// DeletableAt is when its TTL runs out; zero when it never does.
	DeletableAt time.Time `json:"deletableAt,omitzero"`
	// WouldDelete reports that a collector pass now deletes it.
	WouldDelete bool   `json:"wouldDelete"`
	Detail      string `json:"detail,omitempty"`
}

// ClaimsView is what claims prints with -o json or yaml.
type ClaimsView struct {
	Namespace string      `json:"-"`
	Claims    []ClaimView `json:"claims"`
	// Next is when the next claim expires.
	Next time.Time `json:"next,omitzero"`
}

func newClaims(e *env) *cobra.Command {
	var out *output
	var defaultTTL time.Duration
	var all bool
	cmd := &cobra.Command{
		Use:   "claims",
		Short: "Show tracked claims: mounted or not, the pod that last mounted them, their TTL countdown, what the collector would delete now",
		Long: `Show the claims that lifecycle tracks (the pod-name, pvc-ttl and
last-unmounted-on annotations) in the namespace: whether a pod mounts each,
since when it is unmounted and by which pod it was last mounted, its TTL
and when it runs out, and what a collector pass would delete now — a dry
run of lifecycle's Collect (Annotations.PlanCollect) on the claims and
pods read. It deletes nothing. With -A, each namespace is planned alone.`,
		Example: fmt.Sprintf(`  %[1]s claims -n prod
  %[1]s claims -n prod --default-ttl 7d -o json
  %[1]s claims -A`, e.name),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			ns, where := metav1.NamespaceAll, "all namespaces"
			if !all {
				var err error
				if ns, err = e.namespace(); err != nil {
					return err
				}
				where = ns
			}
			kc, _, err := e.clients()
			if err != nil {
				return err
			}
			cl, err := kc.CoreV1().PersistentVolumeClaims(ns).List(cmd.Context(), metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("list claims of %s: %w", where, err)
			}
			pl, err := kc.CoreV1().Pods(ns).List(cmd.Context(), metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("list pods of %s: %w", where, err)
			}
			if !all {
				v, err := claimViews(e.opts.Annotations, cl.Items, pl.Items, defaultTTL, e.clock.Now())
				if err != nil {
					return fmt.Errorf("namespace %s: %w", ns, err)
				}
				v.Namespace = ns
				return printClaims(e, out, []ClaimsView{v}, false)
			}
			// Claim and pod names are unique only in a namespace: each
			// namespace is planned alone, as its collector plans it.
			claims, pods := map[string][]corev1.PersistentVolumeClaim{}, map[string][]corev1.Pod{}
			for _, c := range cl.Items {
				claims[c.Namespace] = append(claims[c.Namespace], c)
			}
			for _, p := range pl.Items {
				pods[p.Namespace] = append(pods[p.Namespace], p)
			}
			var views []ClaimsView
			for _, ns := range slices.Sorted(maps.Keys(claims)) {
				v, err := claimViews(e.opts.Annotations, claims[ns], pods[ns], defaultTTL, e.clock.Now())
				if err != nil {
					return fmt.Errorf("namespace %s: %w", ns, err)
				}
				if len(v.Claims) > 0 {
					v.Namespace = ns
					views = append(views, v)
				}
			}
			return printClaims(e, out, views, true)
		},
	}
	out = addOutput(cmd)
	addAllNamespaces(cmd, &all)
	cmd.AddCommand(newFate(e))
	cmd.Flags().Var((*ttlFlag)(&defaultTTL), "default-ttl", "the TTL of a claim without its own pvc-ttl, as the operator's collector is configured (retention's notation: 7d, 12h); none when unset")
	return cmd
}

// ttlFlag is a duration flag in retention.ParseDuration's notation.
type ttlFlag time.Duration

func (f *ttlFlag) String() string {
	if *f == 0 {
		return ""
	}
	return retention.Format(time.Duration(*f))
}
func (f *ttlFlag) Set(s string) error {
	d, err := retention.ParseDuration(s)
	*f = ttlFlag(d)
	return err
}
func (f *ttlFlag) Type() string { return "duration" }

func claimViews(ann lifecycle.Annotations, claims []corev1.PersistentVolumeClaim, pods []corev1.Pod, defaultTTL time.Duration, now time.Time) (ClaimsView, error) {
	cs := make([]*corev1.PersistentVolumeClaim, len(claims))
	for i := range claims {
		cs[i] = &claims[i]
	}
	ps := make([]*corev1.Pod, len(pods))
	for i := range pods {
		ps[i] = &pods[i]
	}
	plan, err := ann.PlanCollect(cs, ps, defaultTTL, now)
	if err != nil {
		return ClaimsView{}, err
	}
	del, skip := map[string]bool{}, map[string]lifecycle.Skip{}
	for _, d := range plan.Delete {
		del[d.Claim] = true
	}
	for _, s := range append(plan.Mounted, plan.Invalid...) {
		skip[s.Claim] = s
	}
	v := ClaimsView{Claims: []ClaimView{}, Next: plan.Next.UTC()}
	for _, c := range cs {
		tracked := false
		for _, k := range []string{ann.PodNameKey(), ann.TTLKey(), ann.LastUnmountedKey()} {
			if _, ok := c.Annotations[k]; ok {
				tracked = true
			}
		}
		if !tracked {
			continue
		}
		cv := ClaimView{Name: c.Name, WouldDelete: del[c.Name]}
		if s, ok := skip[c.Name]; ok {
			cv.Detail = s.Detail
			cv.State = "stale mark"
			if s.Reason == lifecycle.SkipInvalid {
				cv.State = "invalid"
			}
		}
		u, err := ann.Read(c)
		if err != nil {
			cv.State, cv.Detail = "invalid", err.Error()
			v.Claims = append(v.Claims, cv)
			continue
		}
		cv.Pod, cv.UnmountedSince = u.Pod, u.Since.UTC()
		if u.Since.IsZero() {
			cv.UnmountedSince = time.Time{}
		}
		switch {
		case u.HasTTL:
			cv.TTL = retention.Format(u.TTL)
		case defaultTTL > 0:
			cv.TTL = retention.Format(defaultTTL)
		}
		if cv.State == "" {
			cv.State = "mounted"
			if !u.Since.IsZero() {
				cv.State = "unmounted"
				cv.DeletableAt = u.Expiry(defaultTTL).UTC()
				if u.Expiry(defaultTTL).IsZero() {
					cv.DeletableAt = time.Time{}
				}
			}
		}
		v.Claims = append(v.Claims, cv)
	}
	return v, nil
}

// printClaims prints the views of one namespace, or with all of every
// namespace that has tracked claims.
func printClaims(e *env, out *output, views []ClaimsView, all bool) error {
	w := e.streams.Out
	if out.structured() {
		return printViews(out, w, "ClaimsPreview", views, all, func(v ClaimsView) (string, string) { return v.Namespace, "claims" })
	}
	now := e.clock.Now()
	t := &metav1.Table{ColumnDefinitions: columnsIn(all, "CLAIM", "LAST POD", "STATE", "UNMOUNTED SINCE", "TTL", "DELETABLE", "DETAIL+")}
	n, total := 0, 0
	var next time.Time
	for _, v := range views {
		if !v.Next.IsZero() && (next.IsZero() || v.Next.Before(next)) {
			next = v.Next
		}
		total += len(v.Claims)
		for _, c := range v.Claims {
			when := "never"
			switch {
			case c.WouldDelete:
				when, n = "now", n+1
			case c.State != "unmounted":
				when = "-"
			case !c.DeletableAt.IsZero():
				when = "in " + human(c.DeletableAt.Sub(now))
			}
			pod, ttl, detail := c.Pod, c.TTL, c.Detail
			for _, s := range []*string{&pod, &ttl, &detail} {
				if *s == "" {
					*s = "-"
				}
			}
			t.Rows = append(t.Rows, rowIn(all, v.Namespace, c.Name, pod, c.State, stamp(c.UnmountedSince), ttl, when, detail))
		}
	}
	if all && len(t.Rows) == 0 {
		_, err := fmt.Fprintln(w, "No tracked claims found in any namespace.")
		return err
	}
	if err := out.print(w, "", "", "", nil, t); err != nil {
		return err
	}
	in := ""
	if all {
		in = fmt.Sprintf(" in %d namespaces", len(views))
	}
	when := "no other claim expires by time alone"
	if !next.IsZero() {
		when = fmt.Sprintf("the next expires at %s (in %s)", stamp(next), human(next.Sub(now)))
	}
	_, err := fmt.Fprintf(w, "\ncollector dry run: %d of %d tracked claims%s would be deleted now; %s\n", n, total, in, when)
	return err
}
