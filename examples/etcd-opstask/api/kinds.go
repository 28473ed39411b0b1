package api

import (
	"time"

	"github.com/groundskeeper-io/groundskeeper/opstask"
)

// Default snapshot timeouts of DEP-05, for configs stored without the CRD's
// defaulting (the in-memory store).
const (
	DefaultTimeoutSecondsFull  = 480
	DefaultTimeoutSecondsDelta = 60
)

// SnapshotConfig decodes a task's onDemandSnapshot member.
func SnapshotConfig(t *opstask.Task) (*OnDemandSnapshotConfig, error) {
	return opstask.DecodeConfig[OnDemandSnapshotConfig](t, "onDemandSnapshot")
}

// SnapshotTimeout is the Handler.Timeout of onDemandSnapshot: the config's
// timeoutSecondsFull or timeoutSecondsDelta, by snapshot type.
func SnapshotTimeout(t *opstask.Task) (time.Duration, error) {
	cfg, err := SnapshotConfig(t)
	if err != nil {
		return 0, err
	}
	secs := int32(DefaultTimeoutSecondsFull)
	p := cfg.TimeoutSecondsFull
	if cfg.Type == SnapshotTypeDelta {
		secs, p = DefaultTimeoutSecondsDelta, cfg.TimeoutSecondsDelta
	}
	if p != nil {
		secs = *p
	}
	return time.Duration(secs) * time.Second, nil
}

// SnapshotDuplicateKey is the Handler.DuplicateKey of onDemandSnapshot: DEP-05
// lets a full and a delta snapshot of one etcd be pending together, but not
// two of the same type.
func SnapshotDuplicateKey(t *opstask.Task) (string, error) {
	cfg, err := SnapshotConfig(t)
	if err != nil {
		return "", err
	}
	return string(cfg.Type), nil
}
