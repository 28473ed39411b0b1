package memlock

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/groundskeeper-io/groundskeeper/locking"
)

// Store is an in-memory transactional key-value store. The zero value is an
// empty store ready to use. It must not be copied after first use.
type Store struct {
	mu      sync.Mutex
	version uint64           // version of the last commit
	data    map[string]entry // includes tombstones of deleted keys
	active  int              // transactions in progress
}

type entry struct {
	value   []byte
	present bool   // false: a tombstone, kept while transactions may need it
	modRev  uint64 // commit version that last wrote or deleted the key
}

var _ locking.Backend = (*Store)(nil)

// New returns an empty store.
func New() *Store { return &Store{} }

// As supports no types.
func (s *Store) As(any) bool { return false }

// Update runs fn in a transaction; see locking.Backend.
func (s *Store) Update(ctx context.Context, fn func(locking.Txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	tx := &txn{
		s:           s,
		readVersion: s.version,
		overlay:     map[string]*[]byte{},
	}
	s.active++
	s.mu.Unlock()
	defer s.finish(tx)

	if err := fn(tx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.commit(tx)
}

func (s *Store) finish(tx *txn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tx.done = true
	s.active--
	if s.active == 0 {
		// Tombstones only matter to transactions whose snapshot predates
		// them; with none in progress, every future snapshot is newer.
		for k, e := range s.data {
			if !e.present {
				delete(s.data, k)
			}
		}
	}
}

func (s *Store) commit(tx *txn) error {
	if len(tx.overlay) == 0 && len(tx.clearedPrefixes) == 0 {
		return nil // read-only: every read was checked against the snapshot
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range tx.readKeys {
		if err := s.checkKey(k, tx.readVersion); err != nil {
			return err
		}
	}
	for _, p := range tx.readPrefixes {
		if err := s.checkPrefix(p, tx.readVersion); err != nil {
			return err
		}
	}
	if s.data == nil {
		s.data = map[string]entry{}
	}
	s.version++
	for _, p := range tx.clearedPrefixes {
		for k, e := range s.data {
			if e.present && strings.HasPrefix(k, p) {
				s.data[k] = entry{modRev: s.version}
			}
		}
	}
	for k, v := range tx.overlay {
		if v == nil {
			if e, ok := s.data[k]; ok && e.present {
				s.data[k] = entry{modRev: s.version}
			}
			continue
		}
		s.data[k] = entry{value: *v, present: true, modRev: s.version}
	}
	return nil
}

// checkKey fails if key changed after the snapshot at version v. Callers
// hold s.mu.
func (s *Store) checkKey(key string, v uint64) error {
	if e, ok := s.data[key]; ok && e.modRev > v {
		return fmt.Errorf("memlock: key %q changed since the transaction started: %w", key, locking.ErrConflict)
	}
	return nil
}

func (s *Store) checkPrefix(prefix string, v uint64) error {
	for k, e := range s.data {
		if e.modRev > v && strings.HasPrefix(k, prefix) {
			return fmt.Errorf("memlock: key %q under prefix %q changed since the transaction started: %w", k, prefix, locking.ErrConflict)
		}
	}
	return nil
}

type txn struct {
	s           *Store
	readVersion uint64
	done        bool // guarded by s.mu

	readKeys     []string
	readPrefixes []string

	// overlay holds this transaction's writes: a value, or nil for a clear.
	// Keys under a cleared prefix that were not written since read as
	// absent.
	overlay         map[string]*[]byte
	clearedPrefixes []string
}

func (t *txn) checkDone() error {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.done {
		return locking.ErrTxnDone
	}
	return nil
}

func (t *txn) underClearedPrefix(k string) bool {
	for _, p := range t.clearedPrefixes {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

func (t *txn) Get(ctx context.Context, key []byte) ([]byte, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	if err := t.checkDone(); err != nil {
		return nil, false, err
	}
	k := string(key)
	if v, ok := t.overlay[k]; ok {
		if v == nil {
			return nil, false, nil
		}
		return append([]byte{}, *v...), true, nil
	}
	if t.underClearedPrefix(k) {
		return nil, false, nil
	}
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	if t.done {
		return nil, false, locking.ErrTxnDone
	}
	if err := t.s.checkKey(k, t.readVersion); err != nil {
		return nil, false, err
	}
	t.readKeys = append(t.readKeys, k)
	e, ok := t.s.data[k]
	if !ok || !e.present {
		return nil, false, nil
	}
	return append([]byte{}, e.value...), true, nil
}

func (t *txn) GetPrefix(ctx context.Context, prefix []byte) ([]locking.KeyValue, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p := string(prefix)
	merged := map[string][]byte{}
	t.s.mu.Lock()
	if t.done {
		t.s.mu.Unlock()
		return nil, locking.ErrTxnDone
	}
	if err := t.s.checkPrefix(p, t.readVersion); err != nil {
		t.s.mu.Unlock()
		return nil, err
	}
	t.readPrefixes = append(t.readPrefixes, p)
	for k, e := range t.s.data {
		if e.present && strings.HasPrefix(k, p) && !t.underClearedPrefix(k) {
			merged[k] = e.value
		}
	}
	t.s.mu.Unlock()
	for k, v := range t.overlay {
		if !strings.HasPrefix(k, p) {
			continue
		}
		if v == nil {
			delete(merged, k)
		} else {
			merged[k] = *v
		}
	}
	out := make([]locking.KeyValue, 0, len(merged))
	for k, v := range merged {
		out = append(out, locking.KeyValue{Key: []byte(k), Value: append([]byte{}, v...)})
	}
	sort.Slice(out, func(i, j int) bool { return string(out[i].Key) < string(out[j].Key) })
	return out, nil
}

func (t *txn) Set(key, value []byte) error {
	if err := t.checkDone(); err != nil {
		return err
	}
	v := append([]byte{}, value...)
	t.overlay[string(key)] = &v
	return nil
}

func (t *txn) Clear(key []byte) error {
	if err := t.checkDone(); err != nil {
		return err
	}
	t.overlay[string(key)] = nil
	return nil
}

func (t *txn) ClearPrefix(prefix []byte) error {
	if err := t.checkDone(); err != nil {
		return err
	}
	if len(prefix) == 0 {
		return errors.New("memlock: ClearPrefix with an empty prefix")
	}
	p := string(prefix)
	for k := range t.overlay {
		if strings.HasPrefix(k, p) {
			t.overlay[k] = nil
		}
	}
	t.clearedPrefixes = append(t.clearedPrefixes, p)
	return nil
}
