package share_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
	"github.com/groundskeeper-io/groundskeeper/internal/testbackup"
)

type backup = *testbackup.Backup

// noObjects is never called: New only checks the Config.
type noObjects struct{}

var errUnused = errors.New("not used by New")

func (noObjects) List(context.Context, string) ([]backup, error)      { return nil, errUnused }
func (noObjects) Get(context.Context, string, string) (backup, error) { return nil, errUnused }
func (noObjects) UpdateStatus(context.Context, backup) error          { return errUnused }
func (noObjects) Update(context.Context, backup) error                { return errUnused }
func (noObjects) Delete(context.Context, string, string, types.UID, string) error {
	return errUnused
}

// New refuses a Config it cannot run with, naming the field.
func TestNewNamesTheMissingField(t *testing.T) {
	collector := func(finalizer string) *collect.Collector[backup] {
		c, err := collect.New(collect.Config[backup]{Objects: noObjects{}, Finalizer: finalizer, Secrets: backupstore.SecretsFrom(nil),
			Location: func(context.Context, backup) (collect.Location, error) { return collect.Location{}, nil }})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	full := func() share.Config[backup, backup] {
		return share.Config[backup, backup]{
			Entries: noObjects{}, Buckets: noObjects{}, Collector: collector("f"),
			Bucket:          func(b backup) (string, string) { return b.Namespace, b.Spec.Bucket },
			Limit:           func(backup) int { return 1 },
			Prefix:          func(b backup) *string { return &b.Status.Prefix },
			Conditions:      func(b backup) *[]metav1.Condition { return &b.Status.Conditions },
			BucketFinalizer: "g",
		}
	}
	if _, err := share.New(full()); err != nil {
		t.Fatalf("a full Config: %v", err)
	}
	for _, tc := range []struct {
		field  string
		change func(*share.Config[backup, backup])
	}{
		{"Config.Entries", func(c *share.Config[backup, backup]) { c.Entries = nil }},
		{"Config.Buckets", func(c *share.Config[backup, backup]) { c.Buckets = nil }},
		{"Config.Collector", func(c *share.Config[backup, backup]) { c.Collector = nil }},
		{"Config.Bucket", func(c *share.Config[backup, backup]) { c.Bucket = nil }},
		{"Config.Limit", func(c *share.Config[backup, backup]) { c.Limit = nil }},
		{"Config.Prefix", func(c *share.Config[backup, backup]) { c.Prefix = nil }},
		{"Config.Conditions", func(c *share.Config[backup, backup]) { c.Conditions = nil }},
		{"Config.BucketFinalizer", func(c *share.Config[backup, backup]) { c.BucketFinalizer = "" }},
		{"Config.MarkerKey", func(c *share.Config[backup, backup]) { c.Marker = func(backup) []byte { return nil } }},
	} {
		cfg := full()
		tc.change(&cfg)
		_, err := share.New(cfg)
		if !errors.Is(err, share.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("without %s: %v; want ErrInvalidConfig naming it", tc.field, err)
		}
	}
}
