package memstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"k8s.io/utils/clock"

	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
	"github.com/groundskeeper-io/groundskeeper/opstask"
)

// ErrExists is returned by Create for a task whose namespace and name are
// taken.
var ErrExists = errclass.Retryable("memstore: task already exists")

// Store is an in-memory opstask.Store. The zero value is not usable; call
// New.
type Store struct {
	clock clock.PassiveClock

	mu    sync.Mutex
	tasks map[string]*opstask.Task
	rv    int64
	uid   int64
	subs  map[int]func()
	subID int
	infs  map[int]opstask.TaskEvents
}

var (
	_ opstask.Store    = (*Store)(nil)
	_ opstask.Watcher  = (*Store)(nil)
	_ opstask.Informer = (*Store)(nil)
	_ opstask.Getter   = (*Store)(nil)
)

// New returns an empty Store whose Create stamps tasks with clk (the real
// clock when nil).
func New(clk clock.PassiveClock) *Store {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Store{clock: clk, tasks: map[string]*opstask.Task{}, subs: map[int]func(){}, infs: map[int]opstask.TaskEvents{}}
}

// Create adds a copy of t with a new UID and resource version, and its
// CreationTimestamp set to now unless t has one; the status is kept as
// given. It returns the stored task.
func (s *Store) Create(_ context.Context, t *opstask.Task) (*opstask.Task, error) {
	if t.Name == "" {
		return nil, fmt.Errorf("memstore: create: task has no name")
	}
	s.mu.Lock()
	key := t.Key()
	if _, ok := s.tasks[key]; ok {
		s.mu.Unlock()
		return nil, fmt.Errorf("memstore: create %s: %w", key, ErrExists)
	}
	c := t.DeepCopy()
	c.Deleting = false // as in Kubernetes, a new task is not being deleted
	s.uid++
	s.rv++
	c.UID = "uid-" + strconv.FormatInt(s.uid, 10)
	c.ResourceVersion = strconv.FormatInt(s.rv, 10)
	if c.CreationTimestamp.IsZero() {
		c.CreationTimestamp = s.clock.Now()
	}
	s.tasks[key] = c
	out := c.DeepCopy()
	s.notifyLocked(key)
	s.mu.Unlock()
	return out, nil
}

// Get returns a copy of the task namespace/name.
func (s *Store) Get(_ context.Context, namespace, name string) (*opstask.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[namespace+"/"+name]
	if !ok {
		return nil, fmt.Errorf("memstore: get %s/%s: %w", namespace, name, opstask.ErrNotFound)
	}
	return t.DeepCopy(), nil
}

// Approve adds token to the approvals of the task namespace/name (see
// opstask.Run.Approval), as a person sets the approval annotation on a
// custom resource: the task gets a new resource version.
func (s *Store) Approve(_ context.Context, namespace, name, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[namespace+"/"+name]
	if !ok {
		return fmt.Errorf("memstore: approve %s/%s: %w", namespace, name, opstask.ErrNotFound)
	}
	t.Approvals = append(t.Approvals, token)
	s.rv++
	t.ResourceVersion = strconv.FormatInt(s.rv, 10)
	s.notifyLocked(namespace + "/" + name)
	return nil
}

// List returns copies of all tasks.
func (s *Store) List(context.Context) ([]*opstask.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*opstask.Task, 0, len(s.tasks))
	for _, t := range s.tasks {
		out = append(out, t.DeepCopy())
	}
	return out, nil
}

// UpdateStatus replaces the status of t if its UID and resource version are
// current.
func (s *Store) UpdateStatus(_ context.Context, t *opstask.Task) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.currentLocked(t, "update status of")
	if err != nil {
		return err
	}
	s.rv++
	c := cur.DeepCopy()
	t.Status.DeepCopyInto(&c.Status)
	c.ResourceVersion = strconv.FormatInt(s.rv, 10)
	s.tasks[t.Key()] = c
	t.ResourceVersion = c.ResourceVersion
	s.notifyLocked(t.Key())
	return nil
}

// Delete removes t if its UID and resource version are current. A held task
// stays, with Deleting set and a new resource version, until SetHeld
// releases it.
func (s *Store) Delete(_ context.Context, t *opstask.Task) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.currentLocked(t, "delete")
	if err != nil {
		return err
	}
	if cur.Held {
		if !cur.Deleting {
			s.rv++
			c := cur.DeepCopy()
			c.Deleting = true
			c.ResourceVersion = strconv.FormatInt(s.rv, 10)
			s.tasks[t.Key()] = c
		}
	} else {
		s.rv++
		delete(s.tasks, t.Key())
	}
	s.notifyLocked(t.Key())
	return nil
}

// SetHeld adds or releases the execution hold on t if its UID and resource
// version are current; releasing the hold of a task whose deletion was
// requested removes it.
func (s *Store) SetHeld(_ context.Context, t *opstask.Task, held bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.currentLocked(t, "set hold on")
	if err != nil {
		return err
	}
	if cur.Held == held {
		t.Held = held
		return nil
	}
	s.rv++
	rv := strconv.FormatInt(s.rv, 10)
	if !held && cur.Deleting {
		delete(s.tasks, t.Key())
	} else {
		c := cur.DeepCopy()
		c.Held = held
		c.ResourceVersion = rv
		s.tasks[t.Key()] = c
	}
	t.Held, t.ResourceVersion = held, rv
	s.notifyLocked(t.Key())
	return nil
}

func (s *Store) currentLocked(t *opstask.Task, op string) (*opstask.Task, error) {
	cur, ok := s.tasks[t.Key()]
	if !ok || cur.UID != t.UID {
		return nil, fmt.Errorf("memstore: %s %s: %w", op, t.Key(), opstask.ErrNotFound)
	}
	if cur.ResourceVersion != t.ResourceVersion {
		return nil, fmt.Errorf("memstore: %s %s at version %s (current %s): %w", op, t.Key(), t.ResourceVersion, cur.ResourceVersion, opstask.ErrConflict)
	}
	return cur, nil
}

// Watch calls notify after every change until ctx is done.
func (s *Store) Watch(ctx context.Context, notify func()) error {
	s.mu.Lock()
	s.subID++
	id := s.subID
	s.subs[id] = notify
	s.mu.Unlock()
	<-ctx.Done()
	s.mu.Lock()
	delete(s.subs, id)
	s.mu.Unlock()
	return ctx.Err()
}

// Inform delivers every task to e, then Synced, then every change, until
// ctx is done.
func (s *Store) Inform(ctx context.Context, e opstask.TaskEvents) error {
	s.mu.Lock()
	s.subID++
	id := s.subID
	s.infs[id] = e
	for _, t := range s.tasks {
		e.Set(t.DeepCopy())
	}
	e.Synced()
	s.mu.Unlock()
	<-ctx.Done()
	s.mu.Lock()
	delete(s.infs, id)
	s.mu.Unlock()
	return ctx.Err()
}

// notifyLocked tells watchers and informers that the task key changed.
func (s *Store) notifyLocked(key string) {
	for _, f := range s.subs {
		f() // notify functions must not block (the controller's does not)
	}
	t, ok := s.tasks[key]
	for _, e := range s.infs {
		if !ok {
			ns, name, _ := strings.Cut(key, "/")
			e.Gone(ns, name)
			continue
		}
		e.Set(t.DeepCopy())
	}
}
