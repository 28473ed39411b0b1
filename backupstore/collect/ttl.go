package collect

import (
	"fmt"

	"github.com/groundskeeper-io/groundskeeper/internal/event"
	"github.com/groundskeeper-io/groundskeeper/retention"
)

// EventRecorder is what Config.Recorder takes: the part of client-go's
// record.EventRecorder the package uses (crt.Events adapts a
// controller-runtime recorder). It is the same type as
// lifecycle.EventRecorder, so one recorder serves both.
type EventRecorder = event.Recorder

// TTLField is a BackupPolicy for a backup type whose time-to-live is
// a string field (aerospike's spec.ttl): "" and any zero ("0", "0d") keep
// the backup for ever; anything else is retention.ParseDuration's notation
// ("7d", "12h"), counted from Config.Time. field names the field in the
// error of a value ParseDuration refuses (`spec.ttl "30D": …`), which
// keeps the backup with ReasonInvalidPolicy and unwraps to
// retention.ErrInvalidDuration.
func TTLField[T Object](field string, ttl func(T) string) BackupPolicy[T] {
	return func(o T) (retention.Policy, error) {
		s := ttl(o)
		if s == "" {
			return retention.TTL{ZeroMeansForever: true}, nil
		}
		d, err := retention.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", field, s, err)
		}
		return retention.TTL{After: d, ZeroMeansForever: true}, nil
	}
}
