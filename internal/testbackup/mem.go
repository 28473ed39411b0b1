package testbackup

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Mem keeps Backups in memory as the API server keeps objects, for fast
// property tests of the code that reads and writes them
// (collect.Objects): every write needs the resourceVersion it was read
// with (Conflict otherwise) and gives a new one; Delete checks its UID and
// resourceVersion preconditions; an object with finalizers is marked
// deleted (deletionTimestamp) and goes when its last finalizer is removed;
// a new object gets a new UID. Objects are copied in and out. It is safe
// for concurrent use.
type Mem struct {
	mu      sync.Mutex
	objs    map[types.NamespacedName]*Backup
	version int
	uids    int
	// Now stamps deletion timestamps; default 2026-01-01 (a zero time
	// would not survive a copy).
	Now func() metav1.Time
	// UIDPrefix starts the UIDs it gives (default "uid-"): give each Mem
	// of a test its own, since no two objects of any cluster share a UID.
	UIDPrefix string
}

var resource = Resource.GroupResource()

func (m *Mem) next() string {
	m.version++
	return strconv.Itoa(m.version)
}

// Create adds b (its namespace and name) with a new UID and
// resourceVersion, and returns the stored copy.
func (m *Mem) Create(_ context.Context, b *Backup) (*Backup, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.objs == nil {
		m.objs = map[types.NamespacedName]*Backup{}
	}
	k := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
	if _, ok := m.objs[k]; ok {
		return nil, apierrors.NewAlreadyExists(resource, b.Name)
	}
	b = b.DeepCopyObject().(*Backup)
	m.uids++
	b.UID = types.UID(fmt.Sprintf("%s%d", cmp.Or(m.UIDPrefix, "uid-"), m.uids))
	b.ResourceVersion = m.next()
	b.DeletionTimestamp = nil
	m.objs[k] = b
	return b.DeepCopyObject().(*Backup), nil
}

// List returns copies of the objects of namespace ("": of every one),
// sorted by namespace and name.
func (m *Mem) List(_ context.Context, namespace string) ([]*Backup, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Backup
	for k, b := range m.objs {
		if namespace == "" || k.Namespace == namespace {
			out = append(out, b.DeepCopyObject().(*Backup))
		}
	}
	slices.SortFunc(out, func(a, b *Backup) int {
		if a.Namespace != b.Namespace {
			return compare(a.Namespace, b.Namespace)
		}
		return compare(a.Name, b.Name)
	})
	return out, nil
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Get returns a copy of one object, NotFound if there is none.
func (m *Mem) Get(_ context.Context, namespace, name string) (*Backup, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.objs[types.NamespacedName{Namespace: namespace, Name: name}]
	if !ok {
		return nil, apierrors.NewNotFound(resource, name)
	}
	return b.DeepCopyObject().(*Backup), nil
}

// Update writes b's metadata and spec (not its status), if b carries the
// stored resourceVersion; an object being deleted whose last finalizer
// goes is removed.
func (m *Mem) Update(_ context.Context, b *Backup) error {
	return m.write(b, func(stored *Backup) {
		status := stored.Status
		*stored = *b.DeepCopyObject().(*Backup)
		stored.Status = status
	})
}

// UpdateStatus writes b's status, if b carries the stored
// resourceVersion.
func (m *Mem) UpdateStatus(_ context.Context, b *Backup) error {
	return m.write(b, func(stored *Backup) { stored.Status = b.DeepCopyObject().(*Backup).Status })
}

func (m *Mem) write(b *Backup, apply func(*Backup)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
	stored, ok := m.objs[k]
	switch {
	case !ok:
		return apierrors.NewNotFound(resource, b.Name)
	case b.UID != "" && b.UID != stored.UID:
		return apierrors.NewConflict(resource, b.Name, fmt.Errorf("UID %s, stored %s", b.UID, stored.UID))
	case b.ResourceVersion != stored.ResourceVersion:
		return apierrors.NewConflict(resource, b.Name, fmt.Errorf("resourceVersion %s, stored %s", b.ResourceVersion, stored.ResourceVersion))
	}
	uid, deleted := stored.UID, stored.DeletionTimestamp
	apply(stored)
	stored.UID, stored.DeletionTimestamp, stored.ResourceVersion = uid, deleted, m.next()
	if deleted != nil && len(stored.Finalizers) == 0 {
		delete(m.objs, k)
	}
	return nil
}

// Delete deletes the object if it has uid (when not empty) and
// resourceVersion rv (when not empty): with finalizers it is marked
// deleted, without it goes.
func (m *Mem) Delete(_ context.Context, namespace, name string, uid types.UID, rv string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := types.NamespacedName{Namespace: namespace, Name: name}
	stored, ok := m.objs[k]
	switch {
	case !ok:
		return apierrors.NewNotFound(resource, name)
	case uid != "" && uid != stored.UID, rv != "" && rv != stored.ResourceVersion:
		return apierrors.NewConflict(resource, name, fmt.Errorf("precondition failed"))
	}
	if len(stored.Finalizers) == 0 {
		delete(m.objs, k)
		return nil
	}
	if stored.DeletionTimestamp == nil {
		now := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		if m.Now != nil {
			now = m.Now()
		}
		stored.DeletionTimestamp = &now
		stored.ResourceVersion = m.next()
	}
	return nil
}
