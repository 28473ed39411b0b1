package collect

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/internal/testbackup"
	"github.com/groundskeeper-io/groundskeeper/retention"
)

type backup = testbackup.Backup

// noObjects is never called: the tests here are of pure logic.
type noObjects struct{ Objects[*backup] }

type noSecrets struct{ backupstore.SecretGetter }

func validConfig() Config[*backup] {
	return Config[*backup]{
		Objects: noObjects{},
		Secrets: noSecrets{},
		Location: func(_ context.Context, b *backup) (Location, error) {
			return Location{URL: "s3://" + b.Spec.Bucket, Prefix: b.Spec.Prefix}, nil
		},
		Keep: BackupPolicy[*backup](func(*backup) (retention.Policy, error) { return retention.TTL{After: time.Hour}, nil }),
	}
}

func TestNewRefusesWhatItCannotUse(t *testing.T) {
	groupPolicy := func(context.Context, string) (retention.Policy, error) { return retention.Newest{N: 1}, nil }
	succeeded := func(*backup) retention.Outcome { return retention.OutcomeSucceeded }
	// A Group without a group policy, and a grace period, Force, OnGrace or
	// Backstop without a Finalizer, cannot be written: they are fields of
	// GroupPolicy and Finalizer.
	for _, tc := range []struct {
		name   string
		change func(*Config[*backup])
		field  string
	}{
		{"no Objects", func(c *Config[*backup]) { c.Objects = nil }, "Config.Objects"},
		{"no Secrets", func(c *Config[*backup]) { c.Secrets = nil }, "Config.Secrets"},
		{"no Location", func(c *Config[*backup]) { c.Location = nil }, "Config.Location"},
		{"no policy and no finalizer", func(c *Config[*backup]) { c.Keep = nil }, "Config.Keep"},
		{"a nil policy per backup", func(c *Config[*backup]) { c.Keep = BackupPolicy[*backup](nil) }, "BackupPolicy"},
		{"group policy without an outcome mapping", func(c *Config[*backup]) {
			c.Keep = GroupPolicy[*backup]{Policy: groupPolicy}
		}, "GroupPolicy.Outcome"},
		{"group settings without a group policy", func(c *Config[*backup]) {
			c.Keep = GroupPolicy[*backup]{Outcome: succeeded}
		}, "GroupPolicy.Policy"},
		{"combined without a policy per backup", func(c *Config[*backup]) {
			c.Keep = Combined[*backup]{Group: GroupPolicy[*backup]{Policy: groupPolicy, Outcome: succeeded}}
		}, "Combined.Backup"},
		{"negative RetryAfter", func(c *Config[*backup]) { c.RetryAfter = -time.Second }, "Config.RetryAfter"},
		{"a finalizer without a name", func(c *Config[*backup]) { c.Finalizer = &Finalizer[*backup]{GracePeriod: time.Hour} }, "Config.Finalizer.Name"},
		{"negative grace period", func(c *Config[*backup]) {
			c.Finalizer = &Finalizer[*backup]{Name: "example.com/data", GracePeriod: -time.Hour}
		}, "Config.Finalizer.GracePeriod"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig()
			tc.change(&cfg)
			_, err := New(cfg)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("New: %v, want ErrInvalidConfig naming %s", err, tc.field)
			}
		})
	}
	if _, err := New(validConfig()); err != nil {
		t.Errorf("New(valid): %v", err)
	}
	both := validConfig()
	both.Keep = Combined[*backup]{
		Group:  GroupPolicy[*backup]{Policy: groupPolicy, Outcome: succeeded, Group: func(b *backup) string { return b.Spec.Database }},
		Backup: both.Keep.(BackupPolicy[*backup]),
	}
	if _, err := New(both); err != nil {
		t.Errorf("New with a group policy and a policy per backup: %v", err)
	}
	finalizeOnly := validConfig()
	finalizeOnly.Keep, finalizeOnly.Finalizer = nil, &Finalizer[*backup]{Name: "example.com/data"}
	if _, err := New(finalizeOnly); err != nil {
		t.Errorf("New with a Finalizer and no policy: %v", err)
	}
}

func mk(name, prefix string, created time.Time, outcome string) *backup {
	return &backup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(created)},
		Spec: testbackup.Spec{Bucket: "bk", Prefix: prefix}, Status: testbackup.Status{Outcome: outcome}}
}

// Unknown outcomes are left out of the group's evaluation: a newest backup
// still running neither goes nor pushes the newest good one out, which it
// would if it were read as a success.
func TestDecideLeavesUnknownOutcomesOut(t *testing.T) {
	cfg := validConfig()
	cfg.Keep = GroupPolicy[*backup]{
		Policy: func(context.Context, string) (retention.Policy, error) { return retention.Newest{N: 1}, nil },
		Outcome: func(b *backup) retention.Outcome {
			return map[string]retention.Outcome{"ok": retention.OutcomeSucceeded, "failed": retention.OutcomeFailed}[b.Status.Outcome]
		},
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	objs := []*backup{
		mk("old", "a/", now.Add(-4*time.Hour), "ok"),
		mk("good", "b/", now.Add(-3*time.Hour), "ok"),
		mk("failed", "c/", now.Add(-2*time.Hour), "failed"),
		mk("running", "d/", now.Add(-time.Hour), ""),
	}
	v := c.decide(t.Context(), objs, now)
	for name, want := range map[string]bool{"old": true, "good": false, "failed": true, "running": false} {
		if got := v[types.UID("uid-"+name)].expired; got != want {
			t.Errorf("%s: expired %v, want %v", name, got, want)
		}
	}
	if why := v["uid-running"].why; why != "outcome unknown" {
		t.Errorf("running kept because %q, want outcome unknown", why)
	}
}

// A group's policy and each backup's own together: a backup goes only
// when both let it go, and is kept until the later of the two times.
func TestDecideCombinesTheGroupsPolicyAndEachBackupsOwn(t *testing.T) {
	cfg := validConfig()
	cfg.Keep = Combined[*backup]{
		Group: GroupPolicy[*backup]{
			Policy:  func(context.Context, string) (retention.Policy, error) { return retention.Newest{N: 2}, nil },
			Outcome: func(*backup) retention.Outcome { return retention.OutcomeSucceeded },
		},
		Backup: func(b *backup) (retention.Policy, error) {
			if b.Spec.TTL == "" {
				return retention.TTL{}, nil // no time of its own: left to its group
			}
			return TTLField("spec.ttl", func(b *backup) string { return b.Spec.TTL })(b)
		},
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	withTTL := func(b *backup, ttl string) *backup { b.Spec.TTL = ttl; return b }
	objs := []*backup{
		withTTL(mk("both-expired", "a/", now.Add(-60*time.Minute), "ok"), "30m"),
		withTTL(mk("own-keeps", "b/", now.Add(-50*time.Minute), "ok"), "2h"),
		mk("left-to-group", "c/", now.Add(-45*time.Minute), "ok"),
		withTTL(mk("both-keep", "d/", now.Add(-40*time.Minute), "ok"), "0"),
		withTTL(mk("group-keeps", "e/", now.Add(-30*time.Minute), "ok"), "10m"),
		withTTL(mk("unreadable", "f/", now.Add(-70*time.Minute), "ok"), "30D"),
	}
	v := c.decide(t.Context(), objs, now)
	for _, tc := range []struct {
		name    string
		expired bool
		until   time.Time
		why     string
	}{
		{name: "both-expired", expired: true},
		{name: "own-keeps", until: now.Add(70 * time.Minute), why: "its own policy"},
		{name: "left-to-group", expired: true},
		{name: "both-keep", why: "its group's policy: "},
		{name: "group-keeps", why: "its group's policy"},
	} {
		got := v[types.UID("uid-"+tc.name)]
		if got.err != nil || got.expired != tc.expired || !got.until.Equal(tc.until) || !strings.HasPrefix(got.why, tc.why) {
			t.Errorf("%s: %+v; want expired %v, until %s, why starting %q", tc.name, got, tc.expired, tc.until, tc.why)
		}
	}
	if got := v["uid-both-keep"].why; !strings.Contains(got, "; its own policy: ") {
		t.Errorf("both-keep kept because %q; want both policies named", got)
	}
	if got := v["uid-unreadable"]; got.err == nil || got.expired || !errors.Is(got.err, retention.ErrInvalidDuration) {
		t.Errorf("unreadable: %+v; want kept with the spec.ttl error", got)
	}
}

// fixed is the neighbours of a test: all, as if listed from every
// namespace.
func fixed(all ...*backup) *neighbours[*backup] {
	return &neighbours[*backup]{list: func(context.Context) ([]*backup, error) { return all, nil }}
}

func TestNestedWith(t *testing.T) {
	cfg := validConfig()
	cfg.Location = func(_ context.Context, b *backup) (Location, error) {
		if b.Spec.Bucket == "unreadable" {
			return Location{}, errors.New("spec.bucket: no such bucket object")
		}
		url := b.Spec.Bucket
		if !strings.Contains(url, "://") {
			url = "s3://" + url
		}
		return Location{URL: url, Prefix: b.Spec.Prefix}, nil
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ctx := context.Background()
	outer := mk("a", "backups/ns/a/", now, "")
	in := func(bucket, ns string, b *backup) *backup {
		b.Spec.Bucket, b.Namespace, b.UID = bucket, ns, types.UID(ns+"-"+b.Name)
		return b
	}
	for _, tc := range []struct {
		name  string
		other *backup
		want  bool
	}{
		{"another backup's prefix inside this one's data", mk("b", "backups/ns/a/b/", now, ""), true},
		{"deeper inside", mk("b", "backups/ns/a/x/y/", now, ""), true},
		{"a sibling whose name extends this one's", mk("a0", "backups/ns/a0/", now, ""), false},
		{"the same prefix", mk("b", "backups/ns/a/", now, ""), true},
		{"the same keys in another bucket", in("other", "ns", mk("b", "backups/ns/a/", now, "")), false},
		{"the same prefix in another namespace", in("bk", "team-b", mk("a", "backups/ns/a/", now, "")), true},
		{"the same bucket spelled with a region", in("s3://bk?region=eu-west-1", "ns", mk("b", "backups/ns/a/b/", now, "")), true},
		{"the same bucket in upper case, with a trailing slash", in("s3://BK/", "ns", mk("b", "backups/ns/a/", now, "")), true},
		{"a bucket of that name at another endpoint", in("s3://bk?endpoint=http://127.0.0.1:9000", "ns", mk("b", "backups/ns/a/", now, "")), false},
		{"the bucket's prefix= puts it inside", in("s3://bk?prefix=backups/", "ns", mk("b", "ns/a/b/", now, "")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			near := fixed(outer, tc.other)
			loc, _ := c.cfg.Location(ctx, outer)
			if got := nestedWith(ctx, c, outer, loc, near); (got != "") != tc.want {
				t.Errorf("outer nests with %s (%s): %q, want %v", tc.other.Name, tc.other.Spec.Prefix, got, tc.want)
			}
			// Symmetric: the inner one is refused as well.
			loc, _ = c.cfg.Location(ctx, tc.other)
			if got := nestedWith(ctx, c, tc.other, loc, near); (got != "") != tc.want {
				t.Errorf("%s nests with outer: %q, want %v", tc.other.Name, got, tc.want)
			}
		})
	}
	loc, _ := c.cfg.Location(ctx, outer)
	if got := nestedWith(ctx, c, outer, loc, fixed(outer)); got != "" {
		t.Error("a backup nests with itself")
	}
	// A backup whose location cannot be read may have its data anywhere:
	// nothing is deleted while it cannot be read.
	if got := nestedWith(ctx, c, outer, loc, fixed(outer, in("unreadable", "team-b", mk("x", "x/", now, "")))); !strings.Contains(got, "team-b/x") || !strings.Contains(got, "no such bucket object") {
		t.Errorf("with an unreadable neighbour: %q, want a refusal naming team-b/x and its error", got)
	}
	failing := &neighbours[*backup]{list: func(context.Context) ([]*backup, error) { return nil, errors.New("forbidden") }}
	if got := nestedWith(ctx, c, outer, loc, failing); !strings.Contains(got, "forbidden") {
		t.Errorf("when the backups cannot be listed: %q, want a refusal", got)
	}
}

// A location whose prefix does not end in "/" or climbs out with ".." is
// refused before any store is opened.
func TestLocationIsChecked(t *testing.T) {
	cfg := validConfig()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"backups/ns/b1", "backups/../other/", "", "/abs/"} {
		if _, err := c.location(context.Background(), mk("b", p, time.Now(), "")); !errors.Is(err, backupstore.ErrUnsafePrefix) {
			t.Errorf("prefix %q: %v, want ErrUnsafePrefix", p, err)
		}
	}
}

// The grace-period decision is a pure function of the backup and the time.
// (Moved from the backup-entry example, whose Force is its annotation or a
// backup never admitted.)
func TestGraceUntil(t *testing.T) {
	deleted := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		now      time.Time
		prefix   string
		force    string
		grace    time.Duration
		wantKeep bool
	}{
		{"deleted 1h ago, 72h grace period: kept", deleted.Add(time.Hour), "p/", "", 72 * time.Hour, true},
		{"deleted 72h ago, 72h grace period: deleted", deleted.Add(72 * time.Hour), "p/", "", 72 * time.Hour, false},
		{"1ns before the grace period ends: kept", deleted.Add(72*time.Hour - 1), "p/", "", 72 * time.Hour, true},
		{"force annotation: deleted at once", deleted, "p/", "true", 72 * time.Hour, false},
		{"force annotation other than \"true\": kept", deleted, "p/", "yes", 72 * time.Hour, true},
		{"never admitted: nothing to keep", deleted, "", "", 72 * time.Hour, false},
		{"grace period 0: deleted at once", deleted, "p/", "", 0, false},
		{"deletion timestamp in the future (clock skew): kept", deleted.Add(-time.Hour), "p/", "", 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig()
			cfg.Keep = nil
			cfg.Finalizer = &Finalizer[*backup]{Name: "example.com/data", GracePeriod: tc.grace,
				Force: func(b *backup) bool { return b.Annotations["force"] == "true" || b.Spec.Prefix == "" }}
			c, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			b := mk("shoot--dev--a--1", tc.prefix, deleted.Add(-time.Hour), "")
			b.DeletionTimestamp = &metav1.Time{Time: deleted}
			if tc.force != "" {
				b.Annotations = map[string]string{"force": tc.force}
			}
			keep, at := c.graceUntil(b, tc.now)
			if keep != tc.wantKeep {
				t.Fatalf("keep = %t, want %t", keep, tc.wantKeep)
			}
			if keep && !at.Equal(deleted.Add(tc.grace)) {
				t.Errorf("deletable at %s, want %s", at, deleted.Add(tc.grace))
			}
		})
	}
}
