package backupstore

import (
	"fmt"

	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
)

// ErrInvalidConfig is wrapped by every error about options or arguments
// this package cannot work with (a negative or too large Concurrency, an
// unknown BatchMode, a zero expiry time, a URL parameter it does not
// understand, credentials that lack a key); the message names the field
// and its value. An unsafe prefix is ErrUnsafePrefix instead, and a
// missing Secret or Secret key ErrSecretNotFound or ErrSecretKeyMissing.
var ErrInvalidConfig = errclass.Terminal("backupstore: invalid configuration")

// MaxConcurrency is the largest Concurrency that DeleteOptions and
// CopyOptions accept. Far more requests in flight than a store serves at
// once only queue up, and each costs a goroutine and a connection.
const MaxConcurrency = 256

// checkConcurrency refuses a Concurrency outside 0..MaxConcurrency.
func checkConcurrency(field string, n int) error {
	if n < 0 || n > MaxConcurrency {
		return fmt.Errorf("%w: %s = %d: must be between 0 (the default) and %d", ErrInvalidConfig, field, n, MaxConcurrency)
	}
	return nil
}
