package locking_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/memlock"
)

// Two operator instances share one store. The fake clock stands in for
// clock.RealClock{}, which is the default.
func Example() {
	ctx := context.Background()
	store := memlock.New()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))

	dc1, err := locking.New(locking.Config{Backend: store, LockID: "dc1", Clock: clk})
	if err != nil {
		panic(err)
	}
	dc2, err := locking.New(locking.Config{Backend: store, LockID: "dc2", Clock: clk})
	if err != nil {
		panic(err)
	}

	lease, err := dc1.Take(ctx)
	fmt.Println(lease.Outcome, lease.Holder, lease.End.UTC().Format(time.TimeOnly), err)

	clk.Step(time.Minute)
	_, err = dc2.Take(ctx)
	var held *locking.HeldError
	if errors.As(err, &held) {
		// Requeue for exactly this long.
		fmt.Println("dc2:", errors.Is(err, locking.ErrLocked), held.Holder, held.RequeueAfter)
	}

	lease, err = dc1.Take(ctx)
	fmt.Println(lease.Outcome, lease.End.UTC().Format(time.TimeOnly), err)

	_, _, err = dc2.Release(ctx, nil)
	fmt.Println("dc2 release:", errors.Is(err, locking.ErrNotHeld))
	rec, ok, err := dc1.Release(ctx, &locking.ReleaseOptions{DryRun: true})
	fmt.Println("dc1 would release:", rec.Holder, ok, err)
	rec, ok, err = dc1.Release(ctx, nil)
	fmt.Println("dc1 released:", rec.Holder, ok, err)

	lease, err = dc2.Take(ctx)
	fmt.Println(lease.Outcome, lease.Holder, err)
	// Output:
	// Taken dc1 03:14:05 <nil>
	// dc2: true dc1 9m1s
	// Extended 03:15:05 <nil>
	// dc2 release: true
	// dc1 would release: dc1 true <nil>
	// dc1 released: dc1 true <nil>
	// Taken dc2 <nil>
}

// An expired lock is taken over; the new record starts when the new holder
// took it.
func ExampleLock_Take_takeOver() {
	ctx := context.Background()
	store := memlock.New()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC))
	dc1, _ := locking.New(locking.Config{Backend: store, LockID: "dc1", Clock: clk, Duration: 5 * time.Minute})
	dc2, _ := locking.New(locking.Config{Backend: store, LockID: "dc2", Clock: clk, Duration: 5 * time.Minute})

	if _, err := dc1.Take(ctx); err != nil {
		panic(err)
	}
	clk.Step(6 * time.Minute) // dc1 never extended
	lease, err := dc2.Take(ctx)
	fmt.Println(lease.Outcome, "from", lease.Previous, "at", lease.Start.UTC().Format(time.TimeOnly), err)
	// Output:
	// TakenOver from dc1 at 03:06:00 <nil>
}

// The deny list follows the spec: Allow clears an entry, its absence changes
// nothing. A dry run says what an update would change.
func ExampleLock_UpdateDenyList() {
	ctx := context.Background()
	store := memlock.New()
	admin, _ := locking.New(locking.Config{Backend: store, LockID: "dc3"})
	dc1, _ := locking.New(locking.Config{Backend: store, LockID: "dc1"})

	_, _ = admin.UpdateDenyList(ctx, []locking.DenyListEntry{{ID: "dc1"}, {ID: "dc2"}}, nil)
	_, err := dc1.Take(ctx)
	fmt.Println(errors.Is(err, locking.ErrDenied))

	spec := []locking.DenyListEntry{{ID: "dc1", Allow: true}, {ID: "dc2"}}
	changes, _ := admin.UpdateDenyList(ctx, spec, &locking.DenyListOptions{DryRun: true})
	fmt.Printf("would change %+v\n", changes)
	_, _ = admin.UpdateDenyList(ctx, spec, nil)
	ids, _ := admin.DenyList(ctx)
	fmt.Println(ids)

	lease, err := dc1.Take(ctx)
	fmt.Println(lease.Outcome, err)
	// Output:
	// true
	// would change [{ID:dc1 Allow:true}]
	// [dc2]
	// Taken <nil>
}

// Instances record which process groups are ready for an upgrade, so that
// one of them can restart the whole cluster at once.
func ExampleLock_AddPendingUpgrades() {
	ctx := context.Background()
	store := memlock.New()
	dc1, _ := locking.New(locking.Config{Backend: store, LockID: "dc1"})
	dc2, _ := locking.New(locking.Config{Backend: store, LockID: "dc2"})

	_ = dc1.AddPendingUpgrades(ctx, "7.3.43", []string{"dc1-storage-1", "dc1-log-1"})
	_ = dc2.AddPendingUpgrades(ctx, "7.3.43", []string{"dc2-storage-1"})

	pending, _ := dc1.PendingUpgrades(ctx, "7.3.43")
	ids := make([]string, 0, len(pending))
	for id := range pending {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	fmt.Println(ids)

	wouldClear, _ := dc1.ClearPendingUpgrades(ctx, &locking.ClearUpgradesOptions{DryRun: true})
	fmt.Println("would clear", wouldClear)
	_, _ = dc1.ClearPendingUpgrades(ctx, nil)
	pending, _ = dc2.PendingUpgrades(ctx, "7.3.43")
	fmt.Println(len(pending))
	// Output:
	// [dc1-log-1 dc1-storage-1 dc2-storage-1]
	// would clear [{7.3.43 dc1-log-1} {7.3.43 dc1-storage-1} {7.3.43 dc2-storage-1}]
	// 0
}

// Do runs a step only while the lock is ours, and ends its context when the
// lease ends on the lock's clock.
func ExampleLock_Do() {
	ctx := context.Background()
	store := memlock.New()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	dc1, err := locking.New(locking.Config{Backend: store, LockID: "dc1", Duration: time.Minute, Clock: clk})
	if err != nil {
		panic(err)
	}

	// A step that finishes in time; the lock is released after it.
	_, err = dc1.Do(ctx, func(ctx context.Context, lease locking.Lease) error {
		fmt.Println("reconfiguring until", lease.End.UTC().Format(time.TimeOnly))
		return nil
	}, &locking.DoOptions{Margin: 10 * time.Second, Release: true})
	fmt.Println("first step:", err)

	// A step that outlives its lease: its context ends 10 s before the end.
	_, err = dc1.Do(ctx, func(ctx context.Context, lease locking.Lease) error {
		clk.Step(50 * time.Second)
		<-ctx.Done()
		return ctx.Err()
	}, &locking.DoOptions{Margin: 10 * time.Second})
	fmt.Println("second step: lease ended:", errors.Is(err, locking.ErrLeaseEnded))
	// Output:
	// reconfiguring until 03:05:05
	// first step: <nil>
	// second step: lease ended: true
}
