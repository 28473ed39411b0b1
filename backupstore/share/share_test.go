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
		c, err := collect.New(collect.Config[backup]{Objects: noObjects{}, Finalizer: &collect.Finalizer[backup]{Name: finalizer}, Secrets: backupstore.SecretsFrom(nil),
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
		{"Config.BucketFinalizer", func(c *share.Config[backup, backup]) { c.BucketFinalizer = "" }},
		{"Config.MarkerKey", func(c *share.Config[backup, backup]) { c.MarkerKey = "../up" }},
	} {
		cfg := full()
		tc.change(&cfg)
		_, err := share.New(cfg)
		if !errors.Is(err, share.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("without %s: %v; want ErrInvalidConfig naming it", tc.field, err)
		}
	}
}

// An entry's prefix comes from its whole identity: two namespaces' entries
// of one name never share one, and no namespace and name spell another's.
func TestPrefixOfIsTheWholeIdentity(t *testing.T) {
	entry := func(ns, name string) backup {
		return &testbackup.Backup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	seen := map[string]string{}
	for _, e := range []backup{entry("team-a", "db"), entry("team-b", "db"), entry("team-a", "b.db"), entry("", "db"), entry("", "team-a.db2")} {
		p, err := share.PrefixOf(e)
		if err != nil {
			t.Fatalf("PrefixOf(%s/%s): %v", e.Namespace, e.Name, err)
		}
		if other, dup := seen[p]; dup {
			t.Errorf("%s/%s and %s share the prefix %q", e.Namespace, e.Name, other, p)
		}
		seen[p] = e.Namespace + "/" + e.Name
	}
	if p, err := share.PrefixOf(entry("team-a.b", "db")); err == nil {
		t.Errorf("PrefixOf(team-a.b/db) = %q; want an error (a namespace has no dot)", p)
	}
	if p, _ := share.PrefixOf(entry("team-a", "db")); p != "team-a.db/" {
		t.Errorf("PrefixOf(team-a/db) = %q, want team-a.db/", p)
	}
}
