package crt

import (
	"errors"

	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/lifecycle"
	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/opstask"
	"github.com/groundskeeper-io/groundskeeper/retention"
	"github.com/groundskeeper-io/groundskeeper/subreconcile"
)

// doNotRetry are the errors that retrying cannot cure: bad input or
// configuration, a conflict a person must resolve, or corrupt state.
var doNotRetry = []error{
	lifecycle.ErrInvalidConfig,
	lifecycle.ErrInvalidPolicy,
	lifecycle.ErrInvalidInput,
	lifecycle.ErrConflictingController,
	backupstore.ErrUnsafePrefix,
	backupstore.ErrSecretKeyMissing,
	backupstore.ErrUnsupportedScheme,
	opstask.ErrInvalidSpec,
	opstask.ErrInvalidConfig,
	opstask.ErrIllegalTransition,
	locking.ErrInvalidConfig,
	locking.ErrCorrupt,
	retention.ErrInvalidPolicy,
	retention.ErrInvalidDuration,
	subreconcile.ErrInvalidConfig,
	subreconcile.ErrTerminal,
}

// Terminal returns err wrapped in reconcile.TerminalError when it is one of
// the packages' "do not retry" errors, so that controller-runtime logs it
// and does not requeue the object; any other error is returned as it is
// (nil stays nil). The errors Terminal treats as terminal:
//
//   - lifecycle: ErrInvalidConfig, ErrInvalidPolicy, ErrInvalidInput,
//     ErrConflictingController (another controller owns the claim: a
//     person must decide);
//   - backupstore: ErrUnsafePrefix, ErrSecretKeyMissing, ErrUnsupportedScheme;
//   - opstask: ErrInvalidSpec, ErrInvalidConfig, ErrIllegalTransition;
//   - locking: ErrInvalidConfig, ErrCorrupt;
//   - retention: ErrInvalidPolicy, ErrInvalidDuration;
//   - subreconcile: ErrInvalidConfig, ErrTerminal.
//
// Errors that a later attempt may cure stay retryable: a missing Secret
// (backupstore.ErrSecretNotFound), a full bucket, a held or denied lock,
// stale owner references the garbage collector will remove, conflicts.
func Terminal(err error) error {
	if err == nil || !IsTerminal(err) || errors.Is(err, reconcile.TerminalError(nil)) {
		return err // nil, retryable, or terminal already
	}
	return reconcile.TerminalError(err)
}

// IsTerminal reports whether err is one of the errors Terminal wraps.
func IsTerminal(err error) bool {
	for _, t := range doNotRetry {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
