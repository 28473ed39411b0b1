package locking

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
)

// DenyListEntry is one entry of the lockOptions.denyList field of a cluster
// spec.
//
// The JSON names match the FoundationDB operator's lockOptions.denyList
// entries, so a custom resource's spec can embed the type.
type DenyListEntry struct {
	// ID is the lock ID of an operator instance.
	// +kubebuilder:validation:MinLength=1
	ID string `json:"id"`
	// Allow set removes ID from the deny list; unset adds it.
	// +optional
	Allow bool `json:"allow,omitempty"`
}

// DenyListOptions adjusts UpdateDenyList; nil means the defaults.
type DenyListOptions struct {
	// DryRun makes UpdateDenyList read the deny list and report the entries
	// it would apply, without writing.
	DryRun bool
}

// UpdateDenyList applies a spec's deny list to the store in one transaction,
// exactly as the FoundationDB operator does: an entry with Allow clears the
// key <prefix>/denyList/<ID>, an entry without sets it to the ID, and IDs
// absent from entries are left as they are, so that instances with different
// specs do not fight over the list. To re-admit an instance, list it with
// Allow until the change has been applied, then drop the entry.
//
// It returns the entries that changed the store, in the order given, each
// ID once: an entry with Allow whose key was present (removed), an entry
// without Allow whose key was absent or held another value (added). Entries
// the store already agreed with are left out. With opts.DryRun it returns
// exactly the entries it would apply, read in one transaction, and writes
// nothing.
//
// An empty ID, or an ID listed twice with different Allow values, is
// rejected before anything is written. An empty list does nothing and does
// not touch the backend.
func (l *Lock) UpdateDenyList(ctx context.Context, entries []DenyListEntry, opts *DenyListOptions) ([]DenyListEntry, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	seen := make(map[string]bool, len(entries))
	unique := make([]DenyListEntry, 0, len(entries))
	for i, e := range entries {
		if e.ID == "" {
			return nil, fmt.Errorf("locking: deny list entries[%d].id is empty", i)
		}
		allow, dup := seen[e.ID]
		if dup && allow != e.Allow {
			return nil, fmt.Errorf("locking: deny list entries[%d]: id %q is listed both with and without allow", i, e.ID)
		}
		if !dup {
			unique = append(unique, e)
		}
		seen[e.ID] = e.Allow
	}
	dryRun := opts != nil && opts.DryRun
	var changed []DenyListEntry
	err := l.update(ctx, func(tx Txn) error {
		changed = changed[:0]
		for _, e := range unique {
			key := l.denyKey(e.ID)
			v, present, err := tx.Get(ctx, key)
			if err != nil {
				return err
			}
			switch {
			case e.Allow && present:
				changed = append(changed, e)
				if !dryRun {
					if err := tx.Clear(key); err != nil {
						return err
					}
				}
			case !e.Allow && (!present || !bytes.Equal(v, []byte(e.ID))):
				changed = append(changed, e)
				if !dryRun {
					if err := tx.Set(key, []byte(e.ID)); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("locking: update deny list: %w", err)
	}
	if len(changed) == 0 {
		return nil, nil
	}
	return changed, nil
}

// DenyList returns the lock IDs on the deny list, in key order. It reads the
// IDs from the keys, which is what Take checks; the FoundationDB operator
// reads the values, which it always writes equal to the key suffix.
func (l *Lock) DenyList(ctx context.Context) ([]string, error) {
	prefix := l.key("denyList", "")
	var ids []string
	err := l.update(ctx, func(tx Txn) error {
		kvs, err := tx.GetPrefix(ctx, prefix)
		if err != nil {
			return err
		}
		ids = make([]string, 0, len(kvs))
		for _, kv := range kvs {
			ids = append(ids, string(kv.Key[len(prefix):]))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("locking: read deny list: %w", err)
	}
	return ids, nil
}

// AddPendingUpgrades records, in one transaction, that the given process
// groups are ready for an upgrade to version: key
// <prefix>/upgrades/<version>/<processGroupID>, value the process group ID,
// as the FoundationDB operator writes them. version is written as given; the
// FoundationDB operator uses major.minor.patch ("7.1.26"). An empty list does
// nothing.
func (l *Lock) AddPendingUpgrades(ctx context.Context, version string, processGroupIDs []string) error {
	if err := validateVersion(version); err != nil {
		return err
	}
	if len(processGroupIDs) == 0 {
		return nil
	}
	for i, id := range processGroupIDs {
		if id == "" {
			return fmt.Errorf("locking: processGroupIDs[%d] is empty", i)
		}
	}
	err := l.update(ctx, func(tx Txn) error {
		for _, id := range processGroupIDs {
			if err := tx.Set(l.key("upgrades", version, id), []byte(id)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("locking: add pending upgrades to %q: %w", version, err)
	}
	return nil
}

// PendingUpgrades returns the process groups recorded as ready for an
// upgrade to version, read from the values as the FoundationDB operator
// reads them.
func (l *Lock) PendingUpgrades(ctx context.Context, version string) (map[string]bool, error) {
	if err := validateVersion(version); err != nil {
		return nil, err
	}
	prefix := l.key("upgrades", version, "")
	var pending map[string]bool
	err := l.update(ctx, func(tx Txn) error {
		kvs, err := tx.GetPrefix(ctx, prefix)
		if err != nil {
			return err
		}
		pending = make(map[string]bool, len(kvs))
		for _, kv := range kvs {
			pending[string(kv.Value)] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("locking: read pending upgrades to %q: %w", version, err)
	}
	return pending, nil
}

// ClearUpgradesOptions adjusts ClearPendingUpgrades; nil means the
// defaults.
type ClearUpgradesOptions struct {
	// DryRun makes ClearPendingUpgrades list the records it would remove,
	// without removing them.
	DryRun bool
	// Only, when not nil, clears exactly these records (those the caller
	// read and acted on, as PendingUpgrades or a dry run returned them),
	// each only while its key still holds that value, in one
	// transaction: a record added since (a process group that became
	// ready after the caller read them) is never cleared, as the
	// FoundationDB operator's clear of the whole range would. An empty,
	// non-nil Only clears nothing. Records are returned as cleared.
	Only []PendingUpgrade
}

// PendingUpgrade is one pending-upgrade record: the key
// <prefix>/upgrades/<Version>/<key suffix>, whose value is ProcessGroupID.
type PendingUpgrade struct {
	// Version is the version part of the key.
	Version string
	// ProcessGroupID is the stored value, which the FoundationDB operator
	// reads (and writes equal to the rest of the key).
	ProcessGroupID string
}

// ClearPendingUpgrades removes the pending-upgrade records of every version,
// in one transaction that clears the whole range without reading it, as the
// FoundationDB operator does, and returns nil. That clear is blind: a
// record written after the caller last read them (a process group that
// became ready meanwhile) goes too. Give opts.Only the records read to
// clear only those, each only while it still holds its value, in one
// transaction that reads them (a concurrent change of one is a conflict,
// retried with fresh reads); the records cleared are returned, ordered by
// key.
//
// With opts.DryRun it writes nothing and returns exactly the records the
// clear would remove now, read in one transaction, ordered by key. (The
// clear of the whole range does not read them: on etcd every key a
// writing transaction reads costs a guard, and a large cluster's records
// would exceed the server's limit on operations per transaction; keep
// Only to what one transaction can read.)
func (l *Lock) ClearPendingUpgrades(ctx context.Context, opts *ClearUpgradesOptions) ([]PendingUpgrade, error) {
	prefix := l.key("upgrades", "")
	if opts != nil && opts.Only != nil {
		return l.clearOnly(ctx, opts.Only, opts.DryRun)
	}
	if opts != nil && opts.DryRun {
		var out []PendingUpgrade
		err := l.update(ctx, func(tx Txn) error {
			kvs, err := tx.GetPrefix(ctx, prefix)
			if err != nil {
				return err
			}
			out = make([]PendingUpgrade, 0, len(kvs))
			for _, kv := range kvs {
				version, _, _ := strings.Cut(string(kv.Key[len(prefix):]), "/")
				out = append(out, PendingUpgrade{Version: version, ProcessGroupID: string(kv.Value)})
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("locking: clear pending upgrades (dry run): %w", err)
		}
		return out, nil
	}
	err := l.update(ctx, func(tx Txn) error {
		return tx.ClearPrefix(prefix)
	})
	if err != nil {
		return nil, fmt.Errorf("locking: clear pending upgrades: %w", err)
	}
	return nil, nil
}

// clearOnly clears each record of only whose key holds its process group
// ID (with dryRun: says which it would), in one transaction, and returns
// those, ordered by key.
func (l *Lock) clearOnly(ctx context.Context, only []PendingUpgrade, dryRun bool) ([]PendingUpgrade, error) {
	for i, u := range only {
		if err := validateVersion(u.Version); err != nil {
			return nil, fmt.Errorf("%w: ClearUpgradesOptions.Only[%d]: %w", ErrInvalidConfig, i, err)
		}
		if u.ProcessGroupID == "" {
			return nil, fmt.Errorf("%w: ClearUpgradesOptions.Only[%d]: empty process group ID (version %q)", ErrInvalidConfig, i, u.Version)
		}
	}
	sorted := slices.Clone(only)
	slices.SortFunc(sorted, func(a, b PendingUpgrade) int {
		return bytes.Compare(l.key("upgrades", a.Version, a.ProcessGroupID), l.key("upgrades", b.Version, b.ProcessGroupID))
	})
	sorted = slices.Compact(sorted)
	var cleared []PendingUpgrade
	err := l.update(ctx, func(tx Txn) error {
		cleared = cleared[:0]
		for _, u := range sorted {
			key := l.key("upgrades", u.Version, u.ProcessGroupID)
			v, ok, err := tx.Get(ctx, key)
			if err != nil {
				return err
			}
			if !ok || string(v) != u.ProcessGroupID {
				continue // gone, or not the record read
			}
			if !dryRun {
				if err := tx.Clear(key); err != nil {
					return err
				}
			}
			cleared = append(cleared, u)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("locking: clear %d pending upgrades read: %w", len(sorted), err)
	}
	return cleared, nil
}

// validateVersion rejects versions that would make keys ambiguous: version
// "7.1" with process group "x/y" and version "7.1/x" with "y" would share a
// key.
func validateVersion(version string) error {
	if version == "" {
		return fmt.Errorf("locking: version is empty")
	}
	if strings.Contains(version, "/") {
		return fmt.Errorf("locking: version %q contains '/'", version)
	}
	return nil
}
