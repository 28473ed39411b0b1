package memlock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/memlock"
)

// A transaction whose read was overwritten by a concurrent commit fails with
// locking.ErrConflict and commits nothing.
func ExampleStore_Update() {
	ctx := context.Background()
	store := memlock.New()
	key := []byte("counter")

	err := store.Update(ctx, func(tx locking.Txn) error {
		if _, _, err := tx.Get(ctx, key); err != nil {
			return err
		}
		// Another transaction commits a write to the key we just read.
		if err := store.Update(ctx, func(other locking.Txn) error {
			return other.Set(key, []byte("other"))
		}); err != nil {
			return err
		}
		return tx.Set(key, []byte("mine"))
	})
	fmt.Println(errors.Is(err, locking.ErrConflict))

	_ = store.Update(ctx, func(tx locking.Txn) error {
		v, _, err := tx.Get(ctx, key)
		fmt.Printf("%s\n", v)
		return err
	})
	// Output:
	// true
	// other
}
