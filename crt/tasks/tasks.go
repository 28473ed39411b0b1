package tasks

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/opstask/kubestore"
)

// EveryReplica returns run as a manager Runnable that the manager starts on
// every replica, leader or not (NeedLeaderElection is false): as a
// Controller runs opstask's Controller, which is built to run on every
// replica at once (claims with leases decide which one executes a task),
// so that tasks wait for no election. A Runnable added with mgr.Add and no such method runs on the
// leader only.
func EveryReplica(run func(ctx context.Context) error) manager.Runnable { return everyReplica(run) }

type everyReplica func(ctx context.Context) error

func (r everyReplica) Start(ctx context.Context) error { return r(ctx) }
func (everyReplica) NeedLeaderElection() bool          { return false }

var _ manager.LeaderElectionRunnable = everyReplica(nil)

// Options configures a Controller, NewStore and CRD. The zero value (and
// nil) serves tasks of every namespace that have no target field and
// records no metrics.
type Options struct {
	// TargetField is the spec field that names a task's target, e.g.
	// "etcdName" (DEP-05); empty means tasks have no target and queue
	// together per namespace.
	TargetField string
	// Namespace limits the controller to the tasks of one namespace; empty
	// means all.
	Namespace string
	// Metrics, when set, gives the controller opstask's metrics, built by
	// opstask.NewMetrics from it; its Registerer defaults to
	// controller-runtime's metrics.Registry, which the manager serves.
	// Several controllers in one process may name the same registry: the
	// metrics are registered once on it and shared (see opstask.Metrics).
	// Ignored when Controller.Config has Metrics.
	Metrics *opstask.MetricsConfig
}

// Controller is the opstask Controller of the task resource of Object's
// kind on a manager. SetupWithManager builds it and adds it to the manager
// as a Runnable that runs on every replica (EveryReplica), with the
// manager's logger; the manager starts and stops it.
type Controller struct {
	// Object is a typed task object registered in the manager's scheme, or
	// an unstructured.Unstructured with its GroupVersionKind set.
	Object client.Object
	// Config is opstask's configuration (handlers, TTL, concurrency). Its
	// Store, when nil, is NewStore(mgr, Object, Options): the manager's
	// clients, and nothing else, talk to the API server. Pass a Store of
	// your own (NewStore's, wrapped) only to observe or alter it, as tests
	// do. Config.Identity defaults to the host name (the pod's name in a
	// cluster), which prefixes the run IDs that tell the replicas apart.
	Config opstask.Config
	// Options may be nil.
	Options *Options

	ctl *opstask.Controller
}

// SetupWithManager builds the opstask Controller and adds it to mgr. It
// refuses, before the manager starts, what opstask.New refuses, a task
// object the manager's scheme does not know, and invalid metrics.
func (c *Controller) SetupWithManager(mgr manager.Manager) error {
	var o Options
	if c.Options != nil {
		o = *c.Options
	}
	cfg := c.Config
	if cfg.Store == nil {
		s, err := NewStore(mgr, c.Object, &o)
		if err != nil {
			return err
		}
		cfg.Store = s
	}
	if cfg.Metrics == nil && o.Metrics != nil {
		mc := *o.Metrics
		if mc.Registerer == nil {
			mc.Registerer = crmetrics.Registry
		}
		m, err := opstask.NewMetrics(mc)
		if err != nil {
			return err
		}
		cfg.Metrics = m
	}
	if cfg.Identity == "" {
		cfg.Identity, _ = os.Hostname()
	}
	ctl, err := opstask.New(cfg)
	if err != nil {
		return err
	}
	// The manager gives Runnables a context without its logger: opstask
	// logs through the one in its context.
	logger := mgr.GetLogger().WithName("opstask")
	run := func(ctx context.Context) error { return ctl.Run(log.IntoContext(ctx, logger)) }
	if err := mgr.Add(EveryReplica(run)); err != nil {
		return fmt.Errorf("crt: add task controller: %w", err)
	}
	c.ctl = ctl
	return nil
}

// Tasks returns the opstask Controller SetupWithManager built (nil before
// it), for DryRun and Sync; do not Run it: the manager does.
func (c *Controller) Tasks() *opstask.Controller { return c.ctl }

// NewStore returns an opstask.Store of the tasks of obj's kind over the
// manager's clients, as kubestore's over a dynamic client: it writes
// through mgr.GetClient(), delivers the tasks and their changes from its
// own list and watch of the kind over mgr.GetHTTPClient() (an
// opstask.Informer: the controller decides on its copy, and every write is
// guarded by the resourceVersion it read; finished tasks are delivered by
// reference, see Inform), lists and reads single tasks through
// mgr.GetAPIReader() (opstask's DryRun, Sync outside Run, and a finished
// task before its cleanup: an opstask.Getter), and reads a task before
// changing its hold at the version to change: as its own last status write
// returned it, or else from the API reader. It starts no informer of the
// manager's cache (Watch, used only where the store is not taken as an
// Informer, does). obj is a typed object registered in the manager's
// scheme, or an unstructured.Unstructured with its GroupVersionKind set;
// the store itself handles tasks in unstructured form. Only
// opts.TargetField and opts.Namespace apply; opts may be nil.
//
// It keeps kubestore's guarantees (see package kubestore): status writes
// carry the task's UID and resourceVersion and change nothing else, deletes
// carry UID and resourceVersion preconditions, the hold is kubestore's
// Finalizer, and API errors keep their type, conflicts also wrapping
// opstask.ErrConflict and missing tasks opstask.ErrNotFound. It needs RBAC to
// list, watch, get, update and delete the resource and to update its
// status.
func NewStore(mgr manager.Manager, obj client.Object, opts *Options) (opstask.Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if obj == nil {
		return nil, fmt.Errorf("%w: crt: task object is nil", opstask.ErrInvalidConfig)
	}
	gvk, err := apiutil.GVKForObject(obj, mgr.GetScheme())
	if err != nil {
		return nil, fmt.Errorf("%w: crt: task object %T: %w", opstask.ErrInvalidConfig, obj, err)
	}
	return &taskStore{reader: mgr.GetAPIReader(), writer: mgr.GetClient(), cache: mgr.GetCache(),
		mapper: mgr.GetRESTMapper(), config: mgr.GetConfig(), httpClient: mgr.GetHTTPClient(), scheme: mgr.GetScheme(),
		obj: obj, gvk: gvk, opts: o}, nil
}

// taskPageSize bounds the tasks of one List request.
const taskPageSize = 500

type taskStore struct {
	reader client.Reader
	writer client.Client
	cache  cache.Cache // for Watch only: its informer holds every task whole
	// Inform's list and watch go through a REST client of these, the
	// manager's.
	mapper     meta.RESTMapper
	config     *rest.Config
	httpClient *http.Client
	scheme     *runtime.Scheme
	obj        client.Object
	gvk        schema.GroupVersionKind
	opts       Options

	// written holds, by task key, the task as the API server returned it
	// from this store's last status write: the hold that follows a claim
	// changes the version that write made, which the cache has seldom
	// received yet. At most maxWritten entries; forgotten when used.
	mu      sync.Mutex
	written map[string]*unstructured.Unstructured
}

// maxWritten bounds taskStore.written: past it, the entries are dropped
// (a hold then reads the task once more).
const maxWritten = 1024

var (
	_ opstask.Store    = (*taskStore)(nil)
	_ opstask.Watcher  = (*taskStore)(nil)
	_ opstask.Informer = (*taskStore)(nil)
	_ opstask.Getter   = (*taskStore)(nil)
)

// Get reads the task namespace/name from the API server (the manager's
// API reader).
func (s *taskStore) Get(ctx context.Context, namespace, name string) (*opstask.Task, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(s.gvk)
	if err := s.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u); err != nil {
		return nil, fmt.Errorf("crt: get %s %s/%s: %w", s.gvk.Kind, namespace, name, translateTaskError(err))
	}
	return kubestore.Decode(u, s.opts.TargetField)
}

func (s *taskStore) List(ctx context.Context) ([]*opstask.Task, error) {
	var out []*opstask.Task
	for cont := ""; ; {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(s.gvk.GroupVersion().WithKind(s.gvk.Kind + "List"))
		opts := []client.ListOption{client.Limit(taskPageSize), client.Continue(cont)}
		if s.opts.Namespace != "" {
			opts = append(opts, client.InNamespace(s.opts.Namespace))
		}
		if err := s.reader.List(ctx, l, opts...); err != nil {
			return nil, fmt.Errorf("crt: list %s: %w", s.gvk.Kind, translateTaskError(err))
		}
		for i := range l.Items {
			t, err := kubestore.Decode(&l.Items[i], s.opts.TargetField)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
		}
		if cont = l.GetContinue(); cont == "" {
			return out, nil
		}
	}
}

// object returns t's identity as an object of the kind: name, namespace, UID
// and resourceVersion, which the API server checks on an update.
func (s *taskStore) object(t *opstask.Task) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(s.gvk)
	u.SetNamespace(t.Namespace)
	u.SetName(t.Name)
	u.SetUID(types.UID(t.UID))
	u.SetResourceVersion(t.ResourceVersion)
	return u
}

func (s *taskStore) UpdateStatus(ctx context.Context, t *opstask.Task) error {
	status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&t.Status)
	if err != nil {
		return fmt.Errorf("crt: task %s: convert status: %w", t.Key(), err)
	}
	u := s.object(t)
	u.Object["status"] = status
	if err := s.writer.Status().Update(ctx, u); err != nil {
		return fmt.Errorf("crt: update status of %s %s: %w", s.gvk.Kind, t.Key(), translateTaskError(err))
	}
	t.ResourceVersion = u.GetResourceVersion()
	s.mu.Lock()
	if s.written == nil || len(s.written) >= maxWritten {
		s.written = map[string]*unstructured.Unstructured{}
	}
	s.written[t.Key()] = u
	s.mu.Unlock()
	return nil
}

func (s *taskStore) Delete(ctx context.Context, t *opstask.Task) error {
	uid, rv := types.UID(t.UID), t.ResourceVersion
	err := s.writer.Delete(ctx, s.object(t), client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if err != nil {
		return fmt.Errorf("crt: delete %s %s: %w", s.gvk.Kind, t.Key(), translateTaskError(err))
	}
	return nil
}

// SetHeld updates the task's finalizers at t's version, from the task as
// read at that version: as this store's last status write returned it when
// that is the version, else from the API server. The update is guarded by
// the version, so it fails if anything changed since. A hold that is
// already so in the written copy is confirmed on the API server: that copy
// may outlive the task.
func (s *taskStore) SetHeld(ctx context.Context, t *opstask.Task, held bool) error {
	u, cached, err := s.read(ctx, t)
	if err == nil && cached && slices.Contains(u.GetFinalizers(), kubestore.Finalizer) == held {
		u, err = s.get(ctx, t)
	}
	if err != nil {
		return fmt.Errorf("crt: set hold on %s %s: %w", s.gvk.Kind, t.Key(), translateTaskError(err))
	}
	switch {
	case string(u.GetUID()) != t.UID:
		return fmt.Errorf("crt: set hold on %s %s: uid %s, want %s: %w", s.gvk.Kind, t.Key(), u.GetUID(), t.UID, opstask.ErrNotFound)
	case u.GetResourceVersion() != t.ResourceVersion:
		return fmt.Errorf("crt: set hold on %s %s at version %s (current %s): %w", s.gvk.Kind, t.Key(), t.ResourceVersion, u.GetResourceVersion(), opstask.ErrConflict)
	}
	finalizers := u.GetFinalizers()
	if slices.Contains(finalizers, kubestore.Finalizer) == held {
		t.Held = held
		return nil
	}
	if held {
		finalizers = append(finalizers, kubestore.Finalizer)
	} else {
		finalizers = slices.DeleteFunc(finalizers, func(f string) bool { return f == kubestore.Finalizer })
	}
	u.SetFinalizers(finalizers)
	if err := s.writer.Update(ctx, u); err != nil {
		return fmt.Errorf("crt: set hold on %s %s: %w", s.gvk.Kind, t.Key(), translateTaskError(err))
	}
	t.Held, t.ResourceVersion = held, u.GetResourceVersion()
	return nil
}

// read returns the task t names at t's version: as this store's last
// status write of it returned it, if that is at that version (the hold's
// update needs the finalizers of that version, and nothing more recent: the
// update fails on any later one), else from the API server. cached reports
// that the task was not read from the API server. The manager's cache is not
// read: its informer on the kind would hold every task whole.
func (s *taskStore) read(ctx context.Context, t *opstask.Task) (u *unstructured.Unstructured, cached bool, err error) {
	s.mu.Lock()
	w := s.written[t.Key()]
	delete(s.written, t.Key())
	s.mu.Unlock()
	if w != nil && w.GetResourceVersion() == t.ResourceVersion && string(w.GetUID()) == t.UID {
		return w, true, nil
	}
	u, err = s.get(ctx, t)
	return u, false, err
}

// get reads the task t names from the API server.
func (s *taskStore) get(ctx context.Context, t *opstask.Task) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(s.gvk)
	if err := s.reader.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Name}, u); err != nil {
		return nil, err
	}
	return u, nil
}

// Watch calls notify on every event of the manager's informer on the kind
// until ctx is done.
func (s *taskStore) Watch(ctx context.Context, notify func()) error {
	inf, err := s.cache.GetInformer(ctx, s.obj)
	if err != nil {
		return fmt.Errorf("crt: informer for %s: %w", s.gvk.Kind, err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { notify() },
		UpdateFunc: func(any, any) { notify() },
		DeleteFunc: func(any) { notify() },
	})
	if err != nil {
		return fmt.Errorf("crt: watch %s: %w", s.gvk.Kind, err)
	}
	defer func() { _ = inf.RemoveEventHandler(reg) }()
	<-ctx.Done()
	return ctx.Err()
}

// translateTaskError adds opstask's sentinels to API errors, keeping the
// original in the chain.
func translateTaskError(err error) error {
	switch {
	case apierrors.IsConflict(err):
		return fmt.Errorf("%w: %w", opstask.ErrConflict, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: %w", opstask.ErrNotFound, err)
	}
	return err
}
