package locking

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// DefaultPrefix is the FoundationDB operator's key prefix. The lock key is
// DefaultPrefix + "/global".
const DefaultPrefix = "\xff\x02/org.foundationdb.kubernetes-operator"

// DefaultDuration is how long a taken or extended lock lasts.
const DefaultDuration = 10 * time.Minute

// DefaultMaxAttempts is how many transactions one call may run when they
// conflict with concurrent ones.
const DefaultMaxAttempts = 5

// Config configures a Lock. Backend and LockID are required; every other
// zero field means the default.
type Config struct {
	// Backend is where the lock record, the deny list and the pending
	// upgrades are kept.
	Backend Backend

	// LockID identifies this instance (the FoundationDB operator uses the
	// cluster's processGroupIDPrefix). It must be non-empty valid UTF-8,
	// because it is stored as a tuple unicode string.
	LockID string

	// Prefix is prepended to every key; DefaultPrefix if empty. Instances
	// that coordinate must use the same prefix.
	Prefix string

	// Duration is how long a taken or extended lock lasts: DefaultDuration if
	// zero. It is stored with one-second precision, so it must be at least
	// one second.
	Duration time.Duration

	// ClockSkewTolerance is how much longer than the stored end this
	// instance waits before taking over another instance's lock. Mutual
	// exclusion holds as long as no two instances' clocks differ by more than
	// this; see the package documentation. Zero, the default, is the
	// FoundationDB operator's behaviour. Must not be negative.
	ClockSkewTolerance time.Duration

	// Clock is the source of the current time; clock.RealClock{} if nil.
	Clock clock.PassiveClock

	// Disabled makes Take succeed (OutcomeBypassed) and Release return no
	// record and a nil error without touching the backend (the FoundationDB operator's disableLocks), for when the
	// database is unavailable. Deny-list and upgrade methods are not
	// affected; the FoundationDB operator skips them while locks are
	// disabled, and callers should do the same.
	Disabled bool

	// MaxAttempts bounds the transactions one call runs when they conflict:
	// DefaultMaxAttempts if zero. Must not be negative.
	MaxAttempts int
}

// Lock is one operator instance's handle on the global lock, its deny list
// and the pending-upgrade records, kept in a Backend. It is safe for
// concurrent use.
type Lock struct {
	backend     Backend
	id          string
	prefix      string
	policy      policy
	clock       clock.PassiveClock
	disabled    bool
	maxAttempts int
}

// New validates cfg and returns the Lock of the instance cfg.LockID.
func New(cfg Config) (*Lock, error) {
	if cfg.Backend == nil {
		return nil, fmt.Errorf("%w: Config.Backend is nil", ErrInvalidConfig)
	}
	if cfg.LockID == "" {
		return nil, fmt.Errorf("%w: Config.LockID is empty", ErrInvalidConfig)
	}
	if !utf8.ValidString(cfg.LockID) {
		return nil, fmt.Errorf("%w: Config.LockID = %q: not valid UTF-8", ErrInvalidConfig, cfg.LockID)
	}
	l := &Lock{
		backend:     cfg.Backend,
		id:          cfg.LockID,
		prefix:      cfg.Prefix,
		policy:      policy{duration: cfg.Duration, skew: cfg.ClockSkewTolerance},
		clock:       cfg.Clock,
		disabled:    cfg.Disabled,
		maxAttempts: cfg.MaxAttempts,
	}
	if l.prefix == "" {
		l.prefix = DefaultPrefix
	}
	switch {
	case l.policy.duration == 0:
		l.policy.duration = DefaultDuration
	case l.policy.duration < time.Second:
		return nil, fmt.Errorf("%w: Config.Duration = %s: shorter than the one-second precision of the record", ErrInvalidConfig, cfg.Duration)
	}
	if l.policy.skew < 0 {
		return nil, fmt.Errorf("%w: Config.ClockSkewTolerance = %s: must not be negative", ErrInvalidConfig, cfg.ClockSkewTolerance)
	}
	if l.clock == nil {
		l.clock = clock.RealClock{}
	}
	switch {
	case l.maxAttempts == 0:
		l.maxAttempts = DefaultMaxAttempts
	case l.maxAttempts < 0:
		return nil, fmt.Errorf("%w: Config.MaxAttempts = %d: must not be negative", ErrInvalidConfig, cfg.MaxAttempts)
	}
	return l, nil
}

// ID returns this instance's lock ID.
func (l *Lock) ID() string { return l.id }

// Duration returns the lease a Take gives: Config.Duration, or
// DefaultDuration when it was zero. A caller that derives a margin from it
// (DoOptions.Margin) can check it before taking the lock.
func (l *Lock) Duration() time.Duration { return l.policy.duration }

// Disabled reports whether the lock was configured with Config.Disabled:
// Take then succeeds without touching the backend.
func (l *Lock) Disabled() bool { return l.disabled }

// As calls the backend's As; see Backend.As.
func (l *Lock) As(i any) bool { return l.backend.As(i) }

func (l *Lock) key(parts ...string) []byte {
	k := []byte(l.prefix)
	for _, p := range parts {
		k = append(k, '/')
		k = append(k, p...)
	}
	return k
}

func (l *Lock) globalKey() []byte { return l.key("global") }

func (l *Lock) denyKey(id string) []byte { return l.key("denyList", id) }

// update runs fn in a backend transaction, again if it conflicts, at most
// maxAttempts times. fn must set all its results afresh on every run.
func (l *Lock) update(ctx context.Context, fn func(Txn) error) error {
	var err error
	for range l.maxAttempts {
		if cerr := ctx.Err(); cerr != nil {
			if err != nil {
				return fmt.Errorf("%w (after %w)", cerr, err)
			}
			return cerr
		}
		err = l.backend.Update(ctx, fn)
		if !errors.Is(err, ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("%d attempts: %w", l.maxAttempts, err)
}

// readRecord reads and decodes the lock key; nil if absent.
func (l *Lock) readRecord(ctx context.Context, tx Txn) (*record, error) {
	key := l.globalKey()
	v, ok, err := tx.Get(ctx, key)
	if err != nil || !ok {
		return nil, err
	}
	r, err := decodeRecord(key, v)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

func (l *Lock) denied(ctx context.Context, tx Txn, id string) (bool, error) {
	_, ok, err := tx.Get(ctx, l.denyKey(id))
	return ok, err
}

// Take takes the lock for this instance, extends it if this instance holds
// it, or takes it over if its holder's lock has expired or the holder is on
// the deny list. The whole decision is one transaction (retried on
// conflict).
//
// It fails with an error wrapping ErrDenied if this instance is on the deny
// list, even when it holds the lock; with a *HeldError wrapping ErrLocked if
// another instance holds a live lock, whose RequeueAfter says when to try
// again; with an error wrapping ErrCorrupt if the stored record is not
// valid; and with an error wrapping ErrConflict if every attempt conflicted.
func (l *Lock) Take(ctx context.Context) (Lease, error) {
	now := l.clock.Now()
	log := logr.FromContextOrDiscard(ctx).WithValues("lockID", l.id)
	if l.disabled {
		return Lease{
			Record:  Record{Holder: l.id, Start: time.Unix(now.Unix(), 0), End: time.Unix(now.Add(l.policy.duration).Unix(), 0)},
			Outcome: OutcomeBypassed,
		}, nil
	}
	var d takeDecision
	err := l.update(ctx, func(tx Txn) error {
		now = l.clock.Now()
		s := takeState{self: l.id}
		var err error
		if s.selfDenied, err = l.denied(ctx, tx, l.id); err != nil {
			return err
		}
		if !s.selfDenied {
			if s.current, err = l.readRecord(ctx, tx); err != nil {
				return err
			}
			if s.current != nil && s.current.holder != l.id {
				if s.holderDenied, err = l.denied(ctx, tx, s.current.holder); err != nil {
					return err
				}
			}
		}
		d = decideTake(s, now, l.policy)
		if d.err != nil {
			return d.err
		}
		v, err := encodeRecord(d.write)
		if err != nil {
			return err
		}
		return tx.Set(l.globalKey(), v)
	})
	if err != nil {
		var held *HeldError
		if errors.As(err, &held) || errors.Is(err, ErrDenied) {
			log.V(1).Info("lock not taken", "reason", err.Error())
			return Lease{}, err
		}
		return Lease{}, fmt.Errorf("locking: take lock for %q: %w", l.id, err)
	}
	lease := Lease{Record: d.write.public(), Outcome: d.outcome, Previous: d.previous}
	if d.outcome == OutcomeExtended {
		log.V(1).Info("lock extended", "end", lease.End)
	} else {
		log.Info("lock taken", "outcome", d.outcome.String(), "previousHolder", d.previous, "end", lease.End)
	}
	return lease, nil
}

// ReleaseOptions adjusts Release; nil means the defaults.
type ReleaseOptions struct {
	// DryRun makes Release decide exactly as it would, from the same
	// transaction's reads, and report the record it would clear, without
	// clearing it.
	DryRun bool
}

// Release clears the lock if this instance holds it and the record is
// neither expired nor starting in the future, and returns the record it
// cleared with ok true. If the key is absent it returns ok false and a nil
// error. Otherwise it leaves the record alone and returns a *HeldError
// wrapping ErrNotHeld, or an error wrapping ErrCorrupt if the record is not
// valid. With locking disabled it returns ok false and a nil error without
// touching the backend.
//
// With opts.DryRun it returns exactly what it would return, the record it
// would clear included, and writes nothing.
//
// The FoundationDB operator returns nil when it does not release; we return
// ErrNotHeld so that a caller learns that its work may not have been
// exclusive. A denied instance may still release its own live lock.
func (l *Lock) Release(ctx context.Context, opts *ReleaseOptions) (released Record, ok bool, err error) {
	if l.disabled {
		return Record{}, false, nil
	}
	dryRun := opts != nil && opts.DryRun
	err = l.update(ctx, func(tx Txn) error {
		released, ok = Record{}, false
		cur, err := l.readRecord(ctx, tx)
		if err != nil || cur == nil {
			return err
		}
		if err := decideRelease(l.id, *cur, l.clock.Now()); err != nil {
			return err
		}
		released, ok = cur.public(), true
		if dryRun {
			return nil
		}
		return tx.Clear(l.globalKey())
	})
	if err != nil {
		if errors.Is(err, ErrNotHeld) {
			return Record{}, false, err
		}
		return Record{}, false, fmt.Errorf("locking: release lock for %q: %w", l.id, err)
	}
	if ok && !dryRun {
		logr.FromContextOrDiscard(ctx).Info("lock released", "lockID", l.id)
	}
	return released, ok, nil
}

// Holder returns the stored lock record, ok == false if there is none. It
// does not judge expiry. It reads the backend even when locking is disabled.
func (l *Lock) Holder(ctx context.Context) (rec Record, ok bool, err error) {
	err = l.update(ctx, func(tx Txn) error {
		cur, err := l.readRecord(ctx, tx)
		if err != nil {
			return err
		}
		rec, ok = Record{}, cur != nil
		if ok {
			rec = cur.public()
		}
		return nil
	})
	if err != nil {
		return Record{}, false, fmt.Errorf("locking: read lock: %w", err)
	}
	return rec, ok, nil
}
