package chaos

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync"
	"time"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Deletion is one deletion an audit saw.
type Deletion struct {
	UID             types.UID
	Namespace, Name string
	// Seen is when the audit saw the deletion: the object was gone by
	// then. When the audit's watch broke (an API server restart) and it
	// relisted, Seen is when the relist found the object missing.
	Seen time.Time
	// Requested is the object's deletionTimestamp (seconds, the API
	// server's clock), zero when it was deleted at once (no finalizer).
	Requested time.Time
	// Last is the last state of the object the audit knew.
	Last any
}

// DeleteAudit records every deletion one informer sees, with when it saw
// it, so that a checker can compare them with what was allowed. Start the
// informer before the workload, so that no deletion escapes it: the
// informer's relists after a broken watch report deletions it missed.
type DeleteAudit struct {
	mu   sync.Mutex
	dels []Deletion
}

// Informer is what AuditDeletes needs of an informer: client-go's and
// controller-runtime's both have it.
type Informer interface {
	AddEventHandler(cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
}

// AuditDeletes adds a handler to inf that records its deletions.
func AuditDeletes(inf Informer) (*DeleteAudit, error) {
	a := &DeleteAudit{}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: a.record})
	return a, err
}

func (a *DeleteAudit) record(obj any) {
	seen := time.Now()
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	d := Deletion{UID: m.GetUID(), Namespace: m.GetNamespace(), Name: m.GetName(), Seen: seen, Last: obj}
	if ts := m.GetDeletionTimestamp(); ts != nil {
		d.Requested = ts.Time
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.dels = append(a.dels, d)
}

// Deletions returns the deletions seen so far, in the order seen.
func (a *DeleteAudit) Deletions() []Deletion {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Deletion(nil), a.dels...)
}

// KeyRecord is what listings showed of one key.
type KeyRecord struct {
	// Written is when the key was known to exist: when Expect was called
	// (after the write returned), or the start of the first listing that
	// showed it.
	Written time.Time
	// GoneBy is the end of the first complete listing that started after
	// Written and lacked the key: it was deleted before then. Zero while
	// every such listing showed it.
	GoneBy time.Time
}

// KeyHistory lists the keys under a prefix of a bucket over time, so that
// a checker can tell which keys were deleted, and by when. Listings that
// fail (the store is down) are skipped. It reads the bucket directly: give
// it a bucket that bypasses the faults.
type KeyHistory struct {
	// BucketMayGo says that the system under test may delete the bucket
	// itself (a pool's bucket): a listing that finds it missing
	// (gcerrors.NotFound) is then a complete listing of no key, and the
	// moment is recorded (Gone). Without it, such a listing failed, as
	// one of a store that is down. Set it before Run.
	BucketMayGo bool

	bucket *blob.Bucket
	prefix string

	mu       sync.Mutex
	keys     map[string]*KeyRecord
	listings int
	failures int
	present  bool        // the last listing found the bucket
	gone     []time.Time // when listings found it missing after it was there
}

// NewKeyHistory returns a history of the keys under prefix; call Run to
// list periodically and Expect for each key the workload writes.
func NewKeyHistory(bucket *blob.Bucket, prefix string) *KeyHistory {
	return &KeyHistory{bucket: bucket, prefix: prefix, keys: map[string]*KeyRecord{}}
}

// Expect records that key was written and existed at written.
func (h *KeyHistory) Expect(key string, written time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.keys[key]; !ok {
		h.keys[key] = &KeyRecord{Written: written}
	}
}

// Run lists the keys every interval until ctx ends.
func (h *KeyHistory) Run(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		_ = h.List(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// List lists the keys once and records what it saw.
func (h *KeyHistory) List(ctx context.Context) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	present := map[string]bool{}
	missing := false
	iter := h.bucket.List(&blob.ListOptions{Prefix: h.prefix})
	for {
		o, err := iter.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if h.BucketMayGo && gcerrors.Code(err) == gcerrors.NotFound {
			missing, present = true, map[string]bool{}
			break
		}
		if err != nil {
			h.mu.Lock()
			h.failures++
			h.mu.Unlock()
			return err
		}
		present[o.Key] = true
	}
	end := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.listings++
	if missing && h.present {
		h.gone = append(h.gone, end)
	}
	h.present = !missing
	for k := range present {
		if _, ok := h.keys[k]; !ok {
			h.keys[k] = &KeyRecord{Written: start}
		}
	}
	for k, r := range h.keys {
		if !present[k] && r.GoneBy.IsZero() && r.Written.Before(start) {
			r.GoneBy = end
		}
	}
	return nil
}

// Keys returns a copy of the records by key.
func (h *KeyHistory) Keys() map[string]KeyRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]KeyRecord, len(h.keys))
	for k, r := range h.keys {
		out[k] = *r
	}
	return out
}

// Gone returns when listings found the bucket missing after one had found
// it (BucketMayGo): it was deleted before each of these moments. A bucket
// never found is never gone.
func (h *KeyHistory) Gone() []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.gone)
}

// Listings returns how many listings completed and how many failed.
func (h *KeyHistory) Listings() (ok, failed int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.listings, h.failures
}
