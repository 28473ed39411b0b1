package plugin

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/resource"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/pool"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
)

// Finding is one thing the SDK wrote on an object (a condition, an event,
// an annotation) and what it means.
type Finding struct {
	// Source is "condition <type>", "event" or "annotation <key>".
	Source string `json:"source"`
	Status string `json:"status,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Message is what the controller wrote: it names the keys, claims,
	// Secrets or other backups concerned.
	Message string    `json:"message,omitempty"`
	Since   time.Time `json:"since,omitzero"`
	// Meaning says why the object is kept, or when it becomes deletable,
	// and what would unblock it.
	Meaning string `json:"meaning,omitempty"`
}

// ExplainView is what explain prints with -o json or yaml.
type ExplainView struct {
	// Object is kind/name, Namespace its namespace.
	Object    string    `json:"object"`
	Namespace string    `json:"namespace,omitempty"`
	Findings  []Finding `json:"findings"`
	// DeletableAt is when a claim becomes deletable by its TTL; zero when
	// it does not apply.
	DeletableAt time.Time `json:"deletableAt,omitzero"`
	// Summary is the paragraph explain prints.
	Summary string `json:"summary"`
}

// errNothing is returned for an object on which no SDK package wrote
// anything.
var errNothing = errors.New("no condition, event or annotation of groundskeeper on it")

func newExplain(e *env) *cobra.Command {
	var out *output
	var events int
	cmd := &cobra.Command{
		Use:   "explain KIND/NAME",
		Short: "Explain why an object is kept, or when it becomes deletable",
		Long: `Explain, in one paragraph, what groundskeeper's packages wrote on an object of
any group and kind: the conditions and reasons of backup collection
(backupstore/collect), of shared buckets and their migrations
(backupstore/share and its pool and migrate), and the unmount tracking of claims (lifecycle), with
the policy or the keys, claims or backups concerned and what would unblock
it (a missing Secret, Object Lock until a time, a grace period, a nested
prefix naming the other backup). The object's recent events with these
packages' reasons are read too.`,
		Example: fmt.Sprintf(`  %[1]s explain etcdbackups.backup.example.com/nightly-0412 -n prod
  %[1]s explain pvc/data-db-2 -n prod
  %[1]s explain backupentry/shoot--dev--a -o yaml`, e.name),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			if kind, name, ok := strings.Cut(args[0], "/"); !ok || kind == "" || name == "" {
				return usageError{fmt.Errorf("explain %s: name one object, as KIND/NAME", args[0])}
			}
			ns, err := e.namespace()
			if err != nil {
				return err
			}
			infos, err := resource.NewBuilder(e.flags).Unstructured().
				NamespaceParam(ns).DefaultNamespace().
				ResourceTypeOrNameArgs(false, args...).SingleResourceType().Flatten().
				Do().Infos()
			if err != nil {
				return err
			}
			if len(infos) != 1 {
				return usageError{fmt.Errorf("explain %s: name one object, as KIND/NAME", args[0])}
			}
			u, ok := infos[0].Object.(*unstructured.Unstructured)
			if !ok {
				return fmt.Errorf("explain %s: unexpected object %T", args[0], infos[0].Object)
			}
			kc, _, err := e.clients()
			if err != nil {
				return err
			}
			var evs []corev1.Event
			if events > 0 && u.GetNamespace() != "" {
				l, err := kc.CoreV1().Events(u.GetNamespace()).List(cmd.Context(), metav1.ListOptions{
					FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(u.GetUID())).String()})
				if err != nil {
					return fmt.Errorf("events of %s/%s: %w", infos[0].Mapping.Resource.Resource, u.GetName(), err)
				}
				evs = l.Items
			}
			kind := strings.ToLower(u.GetKind())
			v, err := explain(kind, u, evs, events, e.opts.Annotations, e.clock.Now())
			if err != nil {
				return fmt.Errorf("explain %s/%s: %w", kind, u.GetName(), err)
			}
			if out.structured() {
				return out.print(e.streams.Out, "Explanation", u.GetNamespace(), kind+"."+u.GetName(), v, nil)
			}
			_, err = fmt.Fprintln(e.streams.Out, v.Summary)
			return err
		},
	}
	out = addOutput(cmd)
	cmd.Flags().IntVar(&events, "events", 5, "explain at most this many of the object's newest events with a reason of groundskeeper (0: none)")
	return cmd
}

// explain reads what the SDK wrote on u (and in its events, newest first,
// at most maxEvents) as of now.
func explain(kind string, u *unstructured.Unstructured, evs []corev1.Event, maxEvents int, ann lifecycle.Annotations, now time.Time) (ExplainView, error) {
	v := ExplainView{Object: kind + "/" + u.GetName(), Namespace: u.GetNamespace(), Findings: []Finding{}}
	var parts []string

	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var claim *corev1.PersistentVolumeClaim
	if u.GetKind() == "PersistentVolumeClaim" && u.GetAPIVersion() == "v1" {
		claim = &corev1.PersistentVolumeClaim{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, claim); err != nil {
			return v, err
		}
	}
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		typ, reason := str("type"), str("reason")
		mean := meaning(typ, reason)
		if mean == "" && (claim == nil || typ != "Unused") {
			continue // not written by groundskeeper
		}
		f := Finding{Source: "condition " + typ, Status: str("status"), Reason: reason, Message: str("message"), Meaning: mean}
		if t, err := time.Parse(time.RFC3339, str("lastTransitionTime")); err == nil {
			f.Since = t.UTC()
		}
		v.Findings = append(v.Findings, f)
		s := fmt.Sprintf("%s=%s", typ, f.Status)
		if reason != "" {
			s += " (" + reason
			if !f.Since.IsZero() {
				s += ", since " + stamp(f.Since)
			}
			s += ")"
		}
		if f.Message != "" {
			s += ": " + strings.TrimSuffix(f.Message, ".")
		}
		s += "."
		if mean != "" {
			s += " " + mean
		}
		parts = append(parts, s)
	}

	if claim != nil {
		if s, f, at, ok := explainClaim(claim, ann, now); ok {
			v.Findings = append(v.Findings, f...)
			v.DeletableAt = at
			parts = append(parts, s)
		}
	}
	for _, k := range []string{pool.AnnotationEmptySince, share.AnnotationDeleting, pool.AnnotationStoreNotOwned, pool.AnnotationCreatedBy} {
		val, ok := u.GetAnnotations()[k]
		if !ok {
			continue
		}
		what := map[string]string{
			pool.AnnotationEmptySince:    "The pool found the bucket empty (no claim, no entry) at %s; it deletes a bucket it created once it has been empty for its grace period.",
			share.AnnotationDeleting:     "The pool decided to delete the bucket at %s: no entry is placed or admitted there; the deletion is given up if the bucket turns out to be in use first.",
			pool.AnnotationStoreNotOwned: "The store's bucket is not proven this object's (%s): no entry is placed there and the pool never deletes it.",
			pool.AnnotationCreatedBy:     "Created by the pool %s, which may delete it once it is empty.",
		}[k]
		v.Findings = append(v.Findings, Finding{Source: "annotation " + k, Message: val})
		parts = append(parts, fmt.Sprintf(what, val))
	}

	sort.SliceStable(evs, func(i, j int) bool { return eventTime(evs[i]).After(eventTime(evs[j])) })
	n := 0
	for _, ev := range evs {
		if n >= maxEvents {
			break
		}
		mean := meaning("", ev.Reason)
		if mean == "" {
			continue
		}
		n++
		f := Finding{Source: "event", Status: ev.Type, Reason: ev.Reason, Message: ev.Message, Since: eventTime(ev).UTC(), Meaning: mean}
		v.Findings = append(v.Findings, f)
		parts = append(parts, fmt.Sprintf("Event %s %s at %s: %s. %s", ev.Type, ev.Reason, stamp(f.Since), strings.TrimSuffix(ev.Message, "."), mean))
	}
	if len(v.Findings) == 0 {
		return v, errNothing
	}
	v.Summary = v.Object + ": " + strings.Join(parts, " ")
	return v, nil
}

func eventTime(ev corev1.Event) time.Time {
	switch {
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	}
	return ev.CreationTimestamp.Time
}

// explainClaim says whether the claim is mounted, since when it is not,
// by which pod it was last mounted, and when its TTL makes it deletable.
func explainClaim(claim *corev1.PersistentVolumeClaim, ann lifecycle.Annotations, now time.Time) (string, []Finding, time.Time, bool) {
	tracked := false
	for _, k := range []string{ann.PodNameKey(), ann.TTLKey(), ann.LastUnmountedKey()} {
		if _, ok := claim.Annotations[k]; ok {
			tracked = true
		}
	}
	if !tracked {
		return "", nil, time.Time{}, false
	}
	u, err := ann.Read(claim)
	if err != nil {
		return err.Error() + ". It is never treated as expired until the annotation is corrected.",
			[]Finding{{Source: "annotation", Message: err.Error()}}, time.Time{}, true
	}
	var fs []Finding
	pod := u.Pod
	if pod == "" {
		pod = "<unknown>"
	}
	if u.Since.IsZero() {
		s := fmt.Sprintf("Mounted: pod %s uses it (annotation %s); its TTL runs only once it is unmounted.", pod, ann.PodNameKey())
		fs = append(fs, Finding{Source: "annotation " + ann.PodNameKey(), Message: u.Pod, Meaning: "mounted"})
		return s, fs, time.Time{}, true
	}
	src := "annotation " + ann.LastUnmountedKey()
	if u.FromCondition {
		src = "condition Unused"
	}
	s := fmt.Sprintf("Unmounted since %s (%s); pod %s last mounted it.", stamp(u.Since), src, pod)
	at := u.Expiry(0)
	f := Finding{Source: src, Since: u.Since, Message: u.Pod}
	switch {
	case at.IsZero():
		s += fmt.Sprintf(" It has no TTL (annotation %s), so the collector never deletes it.", ann.TTLKey())
		f.Meaning = "no TTL: kept"
	case !now.Before(at):
		s += fmt.Sprintf(" Its TTL %s ended at %s: the collector deletes it at its next pass, unless a pod mounts it first.", human(u.TTL), stamp(at))
		f.Meaning = "expired: deletable now"
	default:
		s += fmt.Sprintf(" Its TTL %s makes it deletable at %s (in %s), unless a pod mounts it first.", human(u.TTL), stamp(at), human(at.Sub(now)))
		f.Meaning = "deletable at " + stamp(at)
	}
	return s, append(fs, f), at, true
}
