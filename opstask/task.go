package opstask

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Task is one task as the controller sees it, whatever store holds it: the
// object's identity, the generic part of its spec, and its Status.
type Task struct {
	// Namespace and Name identify the task. Namespace is empty for stores
	// without namespaces.
	Namespace, Name string
	// UID identifies this incarnation of the task: a task deleted and
	// created again under the same name has another UID.
	UID string
	// ResourceVersion is the store's version of the task, opaque to the
	// controller. Store.UpdateStatus and Store.Delete succeed only while it
	// is current.
	ResourceVersion string
	// CreationTimestamp orders tasks of a target, with Name breaking ties.
	CreationTimestamp time.Time
	// Deleting reports that the task's deletion was requested and the
	// store keeps it until every hold on it is released (in Kubernetes:
	// deletionTimestamp is set and finalizers remain). The controller
	// starts no such task, and stops the execution of one it runs.
	Deleting bool
	// Held reports that the task carries the controller's execution hold
	// (Store.SetHeld; in kubestore, the finalizer kubestore.Finalizer):
	// while it is held, a request to delete the task only sets Deleting,
	// so that the task keeps its place at the head of its target's queue
	// until its executor has returned.
	Held bool
	// Approvals are the approvals a person gave the task's steps, each a
	// token of Run.Approval (in kubestore, the comma-separated value of the
	// annotation ApprovalAnnotation). Unlike the spec, they may be added
	// while the task runs.
	Approvals []string
	// Spec is the task's specification.
	Spec Spec
	// Status is the task's status.
	Status Status
}

// Spec is the generic part of a task's specification: DEP-05's spec with the
// one-of config kept as raw JSON per member, so that the controller need not
// know the operator's config types.
type Spec struct {
	// Config holds the members of spec.config that are set, by json name.
	// A valid spec has exactly one.
	Config map[string]json.RawMessage
	// TTLSecondsAfterFinished is spec.ttlSecondsAfterFinished; nil when not
	// set, and the controller's default applies.
	TTLSecondsAfterFinished *int32
	// Target is the name of the object the task operates on, in the task's
	// namespace (DEP-05's etcdName); empty when the task has none.
	Target string
}

// Member returns the single member of Config: its json name, which is the
// task kind, and its raw value. It fails, wrapping ErrInvalidSpec, when none
// or several members are set.
func (s Spec) Member() (kind string, config json.RawMessage, err error) {
	switch len(s.Config) {
	case 0:
		return "", nil, fmt.Errorf("%w: spec.config has no member set", ErrInvalidSpec)
	case 1:
		for k, v := range s.Config {
			return k, v, nil
		}
	}
	names := make([]string, 0, len(s.Config))
	for k := range s.Config {
		names = append(names, k)
	}
	sort.Strings(names)
	return "", nil, fmt.Errorf("%w: spec.config has %d members set (%s), want exactly one", ErrInvalidSpec, len(names), strings.Join(names, ", "))
}

// startedWith returns what an execution of t starts with: its kind, the
// digest of its config member and its target.
func (t *Task) startedWith() (*StartedWith, error) {
	kind, raw, err := t.Spec.Member()
	if err != nil {
		return nil, err
	}
	digest, err := configDigest(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: task %s: spec.config.%s: %v", ErrInvalidSpec, t.Key(), kind, err)
	}
	return &StartedWith{Kind: kind, ConfigDigest: digest, Target: t.Spec.Target}, nil
}

// configDigest returns "sha256:" and the hex SHA-256 of raw in canonical
// JSON: keys sorted, no space, numbers as written (decoded as json.Number,
// never rounded through a float), so that two spellings of one value have
// one digest and two values never share one.
func configDigest(raw json.RawMessage) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// checkStartedWith returns nil when t's spec is the one its execution
// started with (Status.StartedWith), and otherwise an error wrapping
// ErrSpecChanged, with code SpecChanged, that says what changed: a
// takeover must not resume an execution with another spec than the one
// its preconditions were checked for and its steps planned with. An
// execution that did not record what it started with cannot be shown to
// have the same spec, and is refused too.
func checkStartedWith(t *Task) error {
	was := t.Status.StartedWith
	if was == nil {
		return WithCode(CodeSpecChanged, fmt.Errorf("%w: task %s: status.startedWith is not recorded, so the spec cannot be shown to be the one the execution started with (an execution started by an older version, or a CRD that prunes the field: regenerate it)", ErrSpecChanged, t.Key()))
	}
	now, err := t.startedWith()
	if err != nil {
		return WithCode(CodeSpecChanged, fmt.Errorf("%w: task %s: the execution started with spec.config.%s, and now: %v", ErrSpecChanged, t.Key(), was.Kind, err))
	}
	var changed []string
	if now.Kind != was.Kind {
		changed = append(changed, fmt.Sprintf("spec.config's member is %s, was %s", now.Kind, was.Kind))
	} else if now.ConfigDigest != was.ConfigDigest {
		changed = append(changed, fmt.Sprintf("spec.config.%s is %s, was %s", now.Kind, now.ConfigDigest, was.ConfigDigest))
	}
	if now.Target != was.Target {
		changed = append(changed, fmt.Sprintf("the target is %q, was %q", now.Target, was.Target))
	}
	if len(changed) == 0 {
		return nil
	}
	return WithCode(CodeSpecChanged, fmt.Errorf("%w: task %s: %s; not resumed with the new spec", ErrSpecChanged, t.Key(), strings.Join(changed, "; ")))
}

// Key returns "namespace/name".
func (t *Task) Key() string { return t.Namespace + "/" + t.Name }

// TargetKey returns the queue the task belongs to: its namespace and target.
// Tasks without a target share one queue per namespace.
func (t *Task) TargetKey() string { return t.Namespace + "/" + t.Spec.Target }

// State returns the task's state, Pending when the status has none.
func (t *Task) State() TaskState {
	if t.Status.State == "" {
		return TaskStatePending
	}
	return t.Status.State
}

// Kind returns the name of the task's config member, or "" when the spec
// does not have exactly one.
func (t *Task) Kind() string {
	k, _, _ := t.Spec.Member()
	return k
}

// Before reports whether t comes before u in its target's queue: by
// creation timestamp, then by name.
func (t *Task) Before(u *Task) bool {
	if !t.CreationTimestamp.Equal(u.CreationTimestamp) {
		return t.CreationTimestamp.Before(u.CreationTimestamp)
	}
	if t.Name != u.Name {
		return t.Name < u.Name
	}
	return t.Namespace < u.Namespace
}

// DeepCopy returns a copy of t that shares no memory with it.
func (t *Task) DeepCopy() *Task {
	c := *t
	if t.Spec.Config != nil {
		c.Spec.Config = make(map[string]json.RawMessage, len(t.Spec.Config))
		for k, v := range t.Spec.Config {
			c.Spec.Config[k] = append(json.RawMessage(nil), v...)
		}
	}
	if t.Spec.TTLSecondsAfterFinished != nil {
		v := *t.Spec.TTLSecondsAfterFinished
		c.Spec.TTLSecondsAfterFinished = &v
	}
	c.Approvals = append([]string(nil), t.Approvals...)
	t.Status.DeepCopyInto(&c.Status)
	return &c
}

// SortTasks sorts tasks into queue order (see Task.Before).
func SortTasks(tasks []*Task) {
	sort.Slice(tasks, func(i, j int) bool { return tasks[i].Before(tasks[j]) })
}
