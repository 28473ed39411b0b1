package locking

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/utils/clock"
)

// DoOptions tunes Do. The zero value (or nil) means: no margin, keep the lock
// after the function returns.
type DoOptions struct {
	// Margin ends the function's context this long before the lease's End:
	// room for the function to stop, and for clock skew with instances that
	// add no ClockSkewTolerance of their own (the FoundationDB operator
	// adds none). Must not be negative, and must be shorter than the
	// lock's Duration.
	Margin time.Duration

	// Release releases the lock once the function has returned nil within
	// the lease, so that other instances need not wait for it to run out. A
	// function that failed keeps the lock: its work may be half done, and
	// this instance, retrying, extends the lock rather than letting another
	// instance start on that state.
	Release bool
}

// Do takes or extends the lock, then runs fn while the lock is held, with a
// context that ends at the lease's End (less Margin) on Config.Clock. It is
// the whole "act only while the lock is ours" pattern:
//
//	_, err := lock.Do(ctx, func(ctx context.Context, lease locking.Lease) error {
//		return reconfigure(ctx) // stops when ctx ends
//	}, &locking.DoOptions{Margin: 30 * time.Second})
//	return crt.Result(ctx, 0, err) // held elsewhere: requeued after HeldError.RequeueAfter
//
// Do returns Take's error unchanged when the lock could not be taken (a
// *HeldError wrapping ErrLocked, ErrDenied, ...), and fn is not called. Then:
//
//   - a lease that has already ended when Take returns (a Take that answered
//     late) is not acted on: fn is not called, and the error wraps
//     ErrLeaseEnded;
//   - fn's context is cancelled when the lease ends, with a cause wrapping
//     ErrLeaseEnded (context.Cause). fn must check its context before each
//     step that must be exclusive; Do cannot stop a step already started;
//   - an error from fn is returned as is, or, when the lease ended while fn
//     ran, wrapped together with ErrLeaseEnded;
//   - fn returning nil after the lease ended is reported as an error wrapping
//     ErrLeaseEnded: its last steps were not exclusive. The lock is then not
//     released (it is no longer ours);
//   - with Release, the lock is released after fn returned nil in time;
//     a Release error is returned, wrapped.
//
// The lease is not extended while fn runs: keep fn much shorter than the
// lock's Duration, and call Do again (which extends the lock) for the next
// step. With Config.Disabled, fn runs with ctx unchanged and the returned
// Lease's Outcome is OutcomeBypassed.
//
// The context's end is timed on Config.Clock, so Do needs a clock with
// timers (k8s.io/utils/clock.Clock, as clock.RealClock and the testing
// clock.FakeClock are); a clock.PassiveClock alone is an ErrInvalidConfig.
func (l *Lock) Do(ctx context.Context, fn func(ctx context.Context, lease Lease) error, o *DoOptions) (Lease, error) {
	var opts DoOptions
	if o != nil {
		opts = *o
	}
	if opts.Margin < 0 {
		return Lease{}, fmt.Errorf("%w: DoOptions.Margin = %s: must not be negative", ErrInvalidConfig, opts.Margin)
	}
	if opts.Margin >= l.policy.duration {
		return Lease{}, fmt.Errorf("%w: DoOptions.Margin = %s: must be shorter than the lock's Duration (%s)", ErrInvalidConfig, opts.Margin, l.policy.duration)
	}
	clk, ok := l.clock.(clock.Clock)
	if !ok {
		return Lease{}, fmt.Errorf("%w: Config.Clock is a %T: Do needs a clock with timers (k8s.io/utils/clock.Clock) to end its context at the lease's end", ErrInvalidConfig, l.clock)
	}
	lease, err := l.Take(ctx)
	if err != nil {
		return lease, err
	}
	if lease.Outcome == OutcomeBypassed {
		return lease, fn(ctx, lease)
	}
	end := lease.End.Add(-opts.Margin)
	left := end.Sub(clk.Now())
	if left <= 0 {
		return lease, fmt.Errorf("%w: %s's lease ends at %s (less a margin of %s), before it could act",
			ErrLeaseEnded, l.id, lease.End.Format(time.RFC3339), opts.Margin)
	}

	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ended := fmt.Errorf("%w: %s's lease ended at %s (less a margin of %s)", ErrLeaseEnded, l.id, lease.End.Format(time.RFC3339), opts.Margin)
	timer := clk.NewTimer(left)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		select {
		case <-timer.C():
			cancel(ended)
		case <-stop:
		}
	}()
	err = fn(fctx, lease)
	close(stop)
	timer.Stop()
	<-done
	// The clock, not only the timer, decides: the timer may not have fired
	// yet when fn returns just after the end.
	if errors.Is(context.Cause(fctx), ErrLeaseEnded) || !clk.Now().Before(end) {
		if err != nil {
			if errors.Is(err, ErrLeaseEnded) {
				return lease, err
			}
			return lease, fmt.Errorf("%w: %w", ended, err)
		}
		return lease, fmt.Errorf("%w; the function returned after it, so its last steps were not exclusive", ended)
	}
	if err != nil {
		return lease, err
	}
	if opts.Release {
		if _, _, err := l.Release(ctx, nil); err != nil {
			return lease, fmt.Errorf("locking: release after Do: %w", err)
		}
	}
	return lease, nil
}
