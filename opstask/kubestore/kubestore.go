package kubestore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/groundskeeper-io/groundskeeper/internal/pager"
	"github.com/groundskeeper-io/groundskeeper/opstask"
)

// Finalizer is the finalizer that holds a running task (opstask.Task.Held):
// the API server keeps a task that has it, with its deletionTimestamp set,
// until the controller has stopped the task's executor and removed it.
const Finalizer = "opstask.groundskeeper.io/execution"

// Config configures a Store.
type Config struct {
	// Client is a dynamic client. Required.
	Client dynamic.Interface
	// Resource is the task resource, e.g.
	// example.opstask.groundskeeper.io/v1alpha1, etcdopstasks. Required.
	Resource schema.GroupVersionResource
	// Kind is the resource's kind, e.g. "EtcdOpsTask". Required.
	Kind string
	// Namespace limits the store to one namespace; empty means all.
	Namespace string
	// TargetField is the name of the spec field that names the target,
	// e.g. "etcdName". Empty means tasks have no target.
	TargetField string
	// LabelSelector, when set, limits the store to matching tasks.
	LabelSelector string
	// PageSize bounds the objects per List request; default 500.
	PageSize int64
}

// Store is an opstask.Store over custom resources.
type Store struct {
	cfg Config
	ri  dynamic.ResourceInterface
}

var (
	_ opstask.Store   = (*Store)(nil)
	_ opstask.Watcher = (*Store)(nil)
)

// New validates cfg and returns a Store.
func New(cfg Config) (*Store, error) {
	switch {
	case cfg.Client == nil:
		return nil, fmt.Errorf("%w: kubestore.Config.Client is nil", opstask.ErrInvalidConfig)
	case cfg.Resource.Resource == "" || cfg.Resource.Version == "":
		return nil, fmt.Errorf("%w: kubestore.Config.Resource = %q: resource and version are required", opstask.ErrInvalidConfig, cfg.Resource.String())
	case cfg.Kind == "":
		return nil, fmt.Errorf("%w: kubestore.Config.Kind is empty", opstask.ErrInvalidConfig)
	case cfg.PageSize < 0:
		return nil, fmt.Errorf("%w: kubestore.Config.PageSize = %d: must not be negative", opstask.ErrInvalidConfig, cfg.PageSize)
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = 500
	}
	var ri dynamic.ResourceInterface = cfg.Client.Resource(cfg.Resource)
	if cfg.Namespace != "" {
		ri = cfg.Client.Resource(cfg.Resource).Namespace(cfg.Namespace)
	}
	return &Store{cfg: cfg, ri: ri}, nil
}

// Client returns the client the store uses for its resource (namespaced
// when Config.Namespace is set).
func (s *Store) Client() dynamic.ResourceInterface { return s.ri }

// List returns every task, read consistently from the API server.
func (s *Store) List(ctx context.Context) ([]*opstask.Task, error) {
	var out []*opstask.Task
	opts := metav1.ListOptions{LabelSelector: s.cfg.LabelSelector, Limit: s.cfg.PageSize}
	list := func(ctx context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
		l, err := s.ri.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("kubestore: list %s: %w", s.cfg.Resource.Resource, translate(err))
		}
		return l, nil
	}
	err := pager.Each(ctx, opts, list, func(l *unstructured.UnstructuredList) error {
		for i := range l.Items {
			t, err := s.FromUnstructured(&l.Items[i])
			if err != nil {
				return err
			}
			out = append(out, t)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateStatus writes t.Status to the status subresource, guarded by
// t.ResourceVersion and t.UID.
func (s *Store) UpdateStatus(ctx context.Context, t *opstask.Task) error {
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&t.Status)
	if err != nil {
		return fmt.Errorf("kubestore: task %s: convert status: %w", t.Key(), err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	u.SetAPIVersion(s.cfg.Resource.GroupVersion().String())
	u.SetKind(s.cfg.Kind)
	u.SetNamespace(t.Namespace)
	u.SetName(t.Name)
	u.SetUID(types.UID(t.UID))
	u.SetResourceVersion(t.ResourceVersion)
	got, err := s.client(t.Namespace).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("kubestore: update status of %s: %w", t.Key(), translate(err))
	}
	t.ResourceVersion = got.GetResourceVersion()
	return nil
}

// Delete deletes t with UID and resourceVersion preconditions.
func (s *Store) Delete(ctx context.Context, t *opstask.Task) error {
	uid := types.UID(t.UID)
	rv := t.ResourceVersion
	err := s.client(t.Namespace).Delete(ctx, t.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv},
	})
	if err != nil {
		return fmt.Errorf("kubestore: delete %s: %w", t.Key(), translate(err))
	}
	return nil
}

// SetHeld adds Finalizer to t (held) or removes it, guarded by t's UID and
// resourceVersion: it reads the task, and updates it at the version read
// only if that is t.ResourceVersion. Removing the finalizer from a task
// whose deletion was requested lets the API server delete it.
func (s *Store) SetHeld(ctx context.Context, t *opstask.Task, held bool) error {
	c := s.client(t.Namespace)
	u, err := c.Get(ctx, t.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("kubestore: set hold on %s: %w", t.Key(), translate(err))
	}
	switch {
	case string(u.GetUID()) != t.UID:
		return fmt.Errorf("kubestore: set hold on %s: uid %s, want %s: %w", t.Key(), u.GetUID(), t.UID, opstask.ErrNotFound)
	case u.GetResourceVersion() != t.ResourceVersion:
		return fmt.Errorf("kubestore: set hold on %s at version %s (current %s): %w", t.Key(), t.ResourceVersion, u.GetResourceVersion(), opstask.ErrConflict)
	}
	finalizers := u.GetFinalizers()
	if slices.Contains(finalizers, Finalizer) == held {
		t.Held = held
		return nil
	}
	if held {
		finalizers = append(finalizers, Finalizer)
	} else {
		finalizers = slices.DeleteFunc(finalizers, func(f string) bool { return f == Finalizer })
	}
	u.SetFinalizers(finalizers)
	got, err := c.Update(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return fmt.Errorf("kubestore: set hold on %s: %w", t.Key(), translate(err))
	}
	t.Held, t.ResourceVersion = held, got.GetResourceVersion()
	return nil
}

// Watch calls notify for every watch event until ctx is done or the watch
// ends.
func (s *Store) Watch(ctx context.Context, notify func()) error {
	// Start from the current version: the caller lists anyway, and replaying
	// every object as ADDED would only cost decoding.
	list, err := s.ri.List(ctx, metav1.ListOptions{LabelSelector: s.cfg.LabelSelector, Limit: 1})
	if err != nil {
		return fmt.Errorf("kubestore: watch %s: %w", s.cfg.Resource.Resource, translate(err))
	}
	w, err := s.ri.Watch(ctx, metav1.ListOptions{LabelSelector: s.cfg.LabelSelector, ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		return fmt.Errorf("kubestore: watch %s: %w", s.cfg.Resource.Resource, translate(err))
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case _, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("kubestore: watch %s: channel closed", s.cfg.Resource.Resource)
			}
			notify()
		}
	}
}

func (s *Store) client(namespace string) dynamic.ResourceInterface {
	if s.cfg.Namespace != "" || namespace == "" {
		return s.ri
	}
	return s.cfg.Client.Resource(s.cfg.Resource).Namespace(namespace)
}

// FromUnstructured converts a task object to an opstask.Task. A config
// member that is not an object, or a status that does not decode, is an
// error naming the field.
func (s *Store) FromUnstructured(u *unstructured.Unstructured) (*opstask.Task, error) {
	return decode(u, s.cfg.Kind, s.cfg.TargetField)
}

// Decode converts a task object to an opstask.Task, its target read from
// spec.<targetField> (none when targetField is empty), as Store.List does:
// for stores over other clients (package crt's, over a controller-runtime
// client). A config member that is not an object, or a status that does not
// decode, is an error naming the object and the field.
func Decode(u *unstructured.Unstructured, targetField string) (*opstask.Task, error) {
	return decode(u, u.GetKind(), targetField)
}

func decode(u *unstructured.Unstructured, kind, targetField string) (*opstask.Task, error) {
	t := &opstask.Task{
		Namespace:         u.GetNamespace(),
		Name:              u.GetName(),
		UID:               string(u.GetUID()),
		ResourceVersion:   u.GetResourceVersion(),
		CreationTimestamp: u.GetCreationTimestamp().Time,
		Deleting:          u.GetDeletionTimestamp() != nil,
		Held:              slices.Contains(u.GetFinalizers(), Finalizer),
	}
	for _, a := range strings.Split(u.GetAnnotations()[opstask.ApprovalAnnotation], ",") {
		if a = strings.TrimSpace(a); a != "" {
			t.Approvals = append(t.Approvals, a)
		}
	}
	where := func(field string) string {
		return fmt.Sprintf("kubestore: %s %s/%s: %s", kind, t.Namespace, t.Name, field)
	}
	if cfg, found, err := unstructured.NestedMap(u.Object, "spec", "config"); err != nil {
		return nil, fmt.Errorf("%s: %w", where("spec.config"), err)
	} else if found {
		t.Spec.Config = make(map[string]json.RawMessage, len(cfg))
		for k, v := range cfg {
			if v == nil {
				continue
			}
			raw, err := json.Marshal(v)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where("spec.config."+k), err)
			}
			t.Spec.Config[k] = raw
		}
	}
	if v, found, err := unstructured.NestedFieldNoCopy(u.Object, "spec", "ttlSecondsAfterFinished"); err == nil && found && v != nil {
		n, ok := toInt32(v)
		if !ok {
			return nil, fmt.Errorf("%s: not a 32-bit integer: %v", where("spec.ttlSecondsAfterFinished"), v)
		}
		t.Spec.TTLSecondsAfterFinished = &n
	}
	if targetField != "" {
		name, _, err := unstructured.NestedString(u.Object, "spec", targetField)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where("spec."+targetField), err)
		}
		t.Spec.Target = name
	}
	if st, found, err := unstructured.NestedMap(u.Object, "status"); err != nil {
		return nil, fmt.Errorf("%s: %w", where("status"), err)
	} else if found {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(st, &t.Status); err != nil {
			return nil, fmt.Errorf("%s: %w", where("status"), err)
		}
	}
	return t, nil
}

func toInt32(v any) (int32, bool) {
	switch n := v.(type) {
	case int64:
		return int32(n), int64(int32(n)) == n
	case int32:
		return n, true
	case int:
		return int32(n), int(int32(n)) == n
	case float64:
		return int32(n), float64(int32(n)) == n
	}
	return 0, false
}

// translate maps API errors to the opstask sentinels, keeping the original
// error in the chain for its message.
func translate(err error) error {
	switch {
	case apierrors.IsConflict(err):
		return fmt.Errorf("%w: %w", opstask.ErrConflict, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: %w", opstask.ErrNotFound, err)
	}
	return err
}
