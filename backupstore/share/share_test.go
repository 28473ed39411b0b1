package share_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"gocloud.dev/blob"

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

// A migration that is done (an entry already migrated) runs nothing and
// changes nothing; an unknown step and a Migration without its hooks are
// refused with ErrInvalidConfig.
func TestMigrationBadInput(t *testing.T) {
	ctx := context.Background()
	called := 0
	hook := func(context.Context) error { called++; return nil }
	m := &share.Migration{
		Buckets: func(context.Context) (*blob.Bucket, *blob.Bucket, func(), error) {
			called++
			return nil, nil, nil, errors.New("not opened")
		},
		TargetPrefix: "entry/",
		Hooks:        share.MigrationHooks{Pause: hook, Switch: hook, Resume: hook, DeleteLegacy: hook},
	}
	st := share.MigrationStatus{Step: share.StepDone}
	done, after, err := m.Next(ctx, &st)
	if !done || after != 0 || err != nil || called != 0 || st != (share.MigrationStatus{Step: share.StepDone}) {
		t.Errorf("done migration: done %v, after %s, err %v, %d calls, status %+v", done, after, err, called, st)
	}
	st = share.MigrationStatus{Step: "Teleport"}
	if _, _, err := m.Next(ctx, &st); !errors.Is(err, share.ErrInvalidConfig) || !strings.Contains(err.Error(), "Teleport") {
		t.Errorf("unknown step: %v", err)
	}
	m.Hooks.Pause = nil
	if _, _, err := m.Next(ctx, &share.MigrationStatus{}); !errors.Is(err, share.ErrInvalidConfig) || !strings.Contains(err.Error(), "Pause") {
		t.Errorf("no Pause hook: %v", err)
	}
	if called != 0 {
		t.Errorf("%d calls on refused input", called)
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
