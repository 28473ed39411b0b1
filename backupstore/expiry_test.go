package backupstore_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	gocmp "github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gocloud.dev/blob"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/proxytest"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// foreignRule is a lifecycle rule this package does not own.
func foreignRule(id, prefix string, days int32) s3types.LifecycleRule {
	return s3types.LifecycleRule{
		ID:         aws.String(id),
		Status:     s3types.ExpirationStatusEnabled,
		Filter:     &s3types.LifecycleRuleFilter{Prefix: aws.String(prefix)},
		Expiration: &s3types.LifecycleExpiration{Days: aws.Int32(days)},
	}
}

func putRules(t testing.TB, c *s3.Client, bucket string, rules []s3types.LifecycleRule) {
	t.Helper()
	if _, err := c.PutBucketLifecycleConfiguration(context.Background(), &s3.PutBucketLifecycleConfigurationInput{
		Bucket: aws.String(bucket), LifecycleConfiguration: &s3types.BucketLifecycleConfiguration{Rules: rules},
	}); err != nil {
		t.Fatalf("put lifecycle rules: %v", err)
	}
}

func getRules(t testing.TB, c *s3.Client, bucket string) []s3types.LifecycleRule {
	t.Helper()
	out, err := c.GetBucketLifecycleConfiguration(context.Background(), &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String(bucket)})
	if err != nil {
		if strings.Contains(err.Error(), "NoSuchLifecycleConfiguration") {
			return nil
		}
		t.Fatalf("get lifecycle rules: %v", err)
	}
	return out.Rules
}

// ruleIDs are the IDs of rules, in order.
func ruleIDs(rules []s3types.LifecycleRule) []string {
	var ids []string
	for _, r := range rules {
		ids = append(ids, aws.ToString(r.ID))
	}
	return ids
}

// TestExpirePrefixMinIOExpires: a rule installed by ExpirePrefix with a date
// already past makes MinIO's lifecycle scanner expire everything under the
// prefix, while a look-alike sibling prefix and the foreign rules survive.
// A dry run writes nothing; a second call changes nothing; PruneExpiry
// then removes the rule, whose prefix is empty and date past, and keeps
// the foreign rules.
func TestExpirePrefixMinIOExpires(t *testing.T) {
	s := testenv.S3(t)
	b := openStore(t, s)
	c := s3Client(t, b)
	ctx := context.Background()
	fill(t, b, "backups/x/", 200, 16)
	sibs := []string{"backups/x-old/00001", "backups/xy/00001", "backups/x0/00001", "other/backups/x/00001"}
	put(t, b, sibs, 16)
	foreign := []s3types.LifecycleRule{foreignRule("foreign-logs", "logs/", 30), foreignRule("foreign-tmp", "tmp/", 1)}
	putRules(t, c, s.Bucket, foreign)

	at := time.Now().UTC().AddDate(0, 0, -1) // its next midnight is today's, already past
	dry, err := backupstore.ExpirePrefix(ctx, b, "backups/x/", at, &backupstore.ExpiryOptions{DryRun: true})
	if err != nil || !dry.Changed || dry.TotalRules != 3 {
		t.Fatalf("dry run: %+v, %v; want a change to 3 rules", dry, err)
	}
	if diff := gocmp.Diff(ruleIDs(foreign), ruleIDs(getRules(t, c, s.Bucket))); diff != "" {
		t.Fatalf("dry run changed the rules (-want +got):\n%s", diff)
	}

	res, err := backupstore.ExpirePrefix(ctx, b, "backups/x/", at, nil)
	if err != nil {
		t.Fatal(err)
	}
	midnight := time.Date(at.Year(), at.Month(), at.Day()+1, 0, 0, 0, 0, time.UTC)
	want := []backupstore.ExpiryRule{{ID: "groundskeeper/expire/backups/x/", Prefix: "backups/x/", Date: midnight}}
	if diff := gocmp.Diff(want, res.Rules); diff != "" || !res.Changed || res.TotalRules != 3 {
		t.Errorf("result %+v; rules (-want +got):\n%s", res, diff)
	}
	rules := getRules(t, c, s.Bucket)
	if diff := gocmp.Diff(foreign, rules[:2], cmpopts.IgnoreUnexported(s3types.LifecycleRule{}, s3types.LifecycleRuleFilter{}, s3types.LifecycleExpiration{})); diff != "" {
		t.Errorf("foreign rules changed (-want +got):\n%s", diff)
	}
	again, err := backupstore.ExpirePrefix(ctx, b, "backups/x/", at, nil)
	if err != nil || again.Changed {
		t.Errorf("second call: %+v, %v; want no change", again, err)
	}
	// Nor after someone appended a rule of their own behind ours.
	foreign = append(foreign, foreignRule("foreign-late", "late/", 9))
	putRules(t, c, s.Bucket, append(getRules(t, c, s.Bucket), foreign[2]))
	again, err = backupstore.ExpirePrefix(ctx, b, "backups/x/", at, nil)
	if err != nil || again.Changed || again.TotalRules != 4 {
		t.Errorf("call after a foreign rule was appended: %+v, %v; want no change, 4 rules", again, err)
	}

	start := time.Now()
	deadline := start.Add(3 * time.Minute)
	for len(snapshot(t, b, "backups/x/")) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d objects left under the prefix after %v", len(snapshot(t, b, "backups/x/")), time.Since(start))
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("MinIO hides the expired objects %v after the rule was installed", time.Since(start))
	// MinIO applies a due rule on listing and reading at once (the objects
	// are no longer listed) and deletes the data in the background: wait
	// until its drive holds none of it.
	dirs, _ := filepath.Glob(minioDrive(s.Bucket, "backups", "x"))
	if len(dirs) != 1 {
		t.Fatalf("MinIO's directory of the prefix: found %v", dirs)
	}
	for {
		entries, err := os.ReadDir(dirs[0])
		if errors.Is(err, os.ErrNotExist) || err == nil && len(entries) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d objects still on MinIO's drive after %v (%v)", len(entries), time.Since(start), err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("MinIO deleted the prefix's data %v after the rule was installed", time.Since(start))
	checkContents(t, b, sibs, 16)

	// A backstop for a prefix not written yet: empty, but its date is ahead.
	if _, err := backupstore.ExpirePrefix(ctx, b, "backups/later/", time.Now().AddDate(0, 0, 30), nil); err != nil {
		t.Fatal(err)
	}
	pruned, err := backupstore.PruneExpiry(ctx, b, nil)
	if err != nil || len(pruned.Rules) != 1 || pruned.Rules[0].ID != want[0].ID {
		t.Fatalf("PruneExpiry: %+v, %v; want our rule for the expired prefix removed", pruned, err)
	}
	if diff := gocmp.Diff([]string{"foreign-logs", "foreign-tmp", "foreign-late", "groundskeeper/expire/backups/later/"}, ruleIDs(getRules(t, c, s.Bucket))); diff != "" {
		t.Errorf("after PruneExpiry (-want +got):\n%s", diff)
	}
}

// TestExpirePrefixKeepsAConcurrentForeignChange: another writer adds a rule
// right after ExpirePrefix read the configuration. ExpirePrefix notices
// the change before writing and starts over, so the other writer's rule is
// kept.
func TestExpirePrefixKeepsAConcurrentForeignChange(t *testing.T) {
	s := testenv.S3(t)
	direct := openStore(t, s)
	c := s3Client(t, direct)
	putRules(t, c, s.Bucket, []s3types.LifecycleRule{foreignRule("foreign-logs", "logs/", 30)})
	p := proxytest.Start(t, s.Endpoint)
	var injected atomic.Bool
	p.SetHandler(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodGet || !r.URL.Query().Has("lifecycle") || !injected.CompareAndSwap(false, true) {
			return false
		}
		// Forward the read, then let the other writer in, then answer
		// with what was read.
		out := r.Clone(r.Context())
		out.RequestURI = ""
		out.URL.Scheme, out.URL.Host = "http", strings.TrimPrefix(s.Endpoint, "http://")
		resp, err := http.DefaultTransport.RoundTrip(out)
		if err != nil {
			t.Errorf("forward: %v", err)
			return false
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		putRules(t, c, s.Bucket, append(getRules(t, c, s.Bucket), foreignRule("foreign-new", "new/", 7)))
		for k, vs := range resp.Header {
			w.Header()[k] = vs
		}
		w.WriteHeader(resp.StatusCode)
		w.Write(body)
		return true
	})
	at := time.Now().AddDate(0, 0, 30)
	if _, err := backupstore.ExpirePrefix(context.Background(), viaProxy(t, s, p), "backups/x/", at, nil); err != nil {
		t.Fatal(err)
	}
	if !injected.Load() {
		t.Fatal("the other writer never came in")
	}
	want := []string{"foreign-logs", "foreign-new", "groundskeeper/expire/backups/x/"}
	if diff := gocmp.Diff(want, ruleIDs(getRules(t, c, s.Bucket))); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
}

// TestExpirePrefixVersionedRules: on a versioned bucket ExpirePrefix also
// expires noncurrent versions and cleans up expired delete markers (a
// rule of its own, which S3 requires), and RemoveExpiry removes both and
// only them.
func TestExpirePrefixVersionedRules(t *testing.T) {
	s := testenv.S3With(t, testenv.BucketOptions{Versioning: true})
	b := openStore(t, s)
	c := s3Client(t, b)
	putRules(t, c, s.Bucket, []s3types.LifecycleRule{foreignRule("foreign-logs", "logs/", 30)})
	at := time.Date(2031, 5, 4, 13, 0, 0, 0, time.UTC)
	res, err := backupstore.ExpirePrefix(context.Background(), b, "backups/v/", at, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []backupstore.ExpiryRule{
		{ID: "groundskeeper/expire/backups/v/", Prefix: "backups/v/", Date: time.Date(2031, 5, 5, 0, 0, 0, 0, time.UTC), NoncurrentDays: 1},
		{ID: "groundskeeper/markers/backups/v/", Prefix: "backups/v/", ExpiredDeleteMarkers: true},
	}
	if diff := gocmp.Diff(want, res.Rules); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if got := ruleIDs(getRules(t, c, s.Bucket)); len(got) != 3 {
		t.Errorf("rules in the bucket: %v", got)
	}
	rm, err := backupstore.RemoveExpiry(context.Background(), b, "backups/v/", nil)
	if err != nil || len(rm.Rules) != 2 || rm.TotalRules != 1 {
		t.Fatalf("RemoveExpiry: %+v, %v; want 2 removed, 1 left", rm, err)
	}
	if diff := gocmp.Diff([]string{"foreign-logs"}, ruleIDs(getRules(t, c, s.Bucket))); diff != "" {
		t.Errorf("after RemoveExpiry (-want +got):\n%s", diff)
	}
	// With only our rules in it, removing them deletes the configuration,
	// which S3 cannot hold empty.
	if _, err := c.DeleteBucketLifecycle(context.Background(), &s3.DeleteBucketLifecycleInput{Bucket: aws.String(s.Bucket)}); err != nil {
		t.Fatal(err)
	}
	if _, err := backupstore.ExpirePrefix(context.Background(), b, "backups/v/", at, nil); err != nil {
		t.Fatal(err)
	}
	if rm, err := backupstore.RemoveExpiry(context.Background(), b, "backups/v/", nil); err != nil || rm.TotalRules != 0 {
		t.Fatalf("RemoveExpiry of the only rules: %+v, %v", rm, err)
	}
	if rules := getRules(t, c, s.Bucket); len(rules) != 0 {
		t.Errorf("rules left: %v", ruleIDs(rules))
	}
}

// TestExpirePrefixRuleLimit: a bucket whose configuration holds 1,000
// rules gets no more: ErrTooManyRules, and the configuration is unchanged.
func TestExpirePrefixRuleLimit(t *testing.T) {
	s := testenv.S3(t)
	b := openStore(t, s)
	c := s3Client(t, b)
	rules := make([]s3types.LifecycleRule, 1000)
	for i := range rules {
		rules[i] = foreignRule(fmt.Sprintf("foreign-%04d", i), fmt.Sprintf("f/%04d/", i), 30)
	}
	putRules(t, c, s.Bucket, rules)
	_, err := backupstore.ExpirePrefix(context.Background(), b, "backups/x/", time.Now(), nil)
	if !errors.Is(err, backupstore.ErrTooManyRules) || !strings.Contains(err.Error(), "1000") {
		t.Fatalf("ExpirePrefix = %v; want ErrTooManyRules naming the limit", err)
	}
	if n := len(getRules(t, c, s.Bucket)); n != 1000 {
		t.Errorf("%d rules after the refusal; want 1000", n)
	}
}

// TestExpirePrefixRefuses: stores without a lifecycle API here, and unsafe
// prefixes, are refused before anything is written.
func TestExpirePrefixRefuses(t *testing.T) {
	ctx := context.Background()
	for _, st := range []struct {
		name string
		open func(testing.TB) *testenv.BlobStore
	}{{"file", testenv.File}, {"mem", testenv.Mem}} {
		b := openStore(t, st.open(t))
		if _, err := backupstore.ExpirePrefix(ctx, b, "backups/x/", time.Now(), nil); !errors.Is(err, backupstore.ErrExpiryUnsupported) {
			t.Errorf("%s: ExpirePrefix = %v; want ErrExpiryUnsupported", st.name, err)
		}
	}
	s := testenv.S3(t)
	b := openStore(t, s)
	for _, prefix := range []string{"backups/x", "", "/backups/"} {
		if _, err := backupstore.ExpirePrefix(ctx, b, prefix, time.Now(), nil); !errors.Is(err, backupstore.ErrUnsafePrefix) {
			t.Errorf("ExpirePrefix(%q) = %v; want ErrUnsafePrefix", prefix, err)
		}
	}
	pb := openURL(t, withParam(s.URL, "prefix=tenant-a"), credsFor("s3"))
	if _, err := backupstore.ExpirePrefix(ctx, pb, "b/", time.Now(), nil); !errors.Is(err, backupstore.ErrUnsafePrefix) {
		t.Errorf("ExpirePrefix through prefix=tenant-a: %v; want ErrUnsafePrefix", err)
	}
	if rules := getRules(t, s3Client(t, b), s.Bucket); len(rules) != 0 {
		t.Errorf("refused calls wrote rules: %v", ruleIDs(rules))
	}
}

// isLifecycleWrite matches a PUT or DELETE of the bucket's lifecycle
// configuration.
func isLifecycleWrite(r *http.Request) bool {
	return (r.Method == http.MethodPut || r.Method == http.MethodDelete) && r.URL.Query().Has("lifecycle")
}

// TestLifecycleWriteWithLostAnswerKeepsAnotherWritersRule: the store
// applies ExpirePrefix's (or RemoveExpiry's) write of the lifecycle
// configuration, the answer is lost, and another writer adds a rule before
// the client hears of it. A resent write would carry the configuration read
// before the first one and erase the other writer's rule (with only our
// rules left, a resent DeleteBucketLifecycle deletes the other writer's
// whole configuration); the write must go out once, and the call start
// over from the read.
func TestLifecycleWriteWithLostAnswerKeepsAnotherWritersRule(t *testing.T) {
	at := time.Now().AddDate(0, 0, 30)
	for _, tc := range []struct {
		name    string
		initial func(t *testing.T, bucket string, c *s3.Client) // the configuration before the call
		call    func(ctx context.Context, b *blob.Bucket) (*backupstore.ExpiryResult, error)
		want    []string
	}{{
		name: "ExpirePrefix",
		initial: func(t *testing.T, bucket string, c *s3.Client) {
			putRules(t, c, bucket, []s3types.LifecycleRule{foreignRule("foreign-logs", "logs/", 30)})
		},
		call: func(ctx context.Context, b *blob.Bucket) (*backupstore.ExpiryResult, error) {
			return backupstore.ExpirePrefix(ctx, b, "backups/x/", at, &backupstore.ExpiryOptions{Retry: backupstore.Retry{Initial: 10 * time.Millisecond}})
		},
		want: []string{"foreign-logs", "groundskeeper/expire/backups/x/", "foreign-new"},
	}, {
		name: "RemoveExpiry of the only rules (DeleteBucketLifecycle)",
		initial: func(t *testing.T, bucket string, c *s3.Client) {
			putRules(t, c, bucket, []s3types.LifecycleRule{{
				ID: aws.String("groundskeeper/expire/backups/x/"), Status: s3types.ExpirationStatusEnabled,
				Filter:     &s3types.LifecycleRuleFilter{Prefix: aws.String("backups/x/")},
				Expiration: &s3types.LifecycleExpiration{Date: aws.Time(time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC))},
			}})
		},
		call: func(ctx context.Context, b *blob.Bucket) (*backupstore.ExpiryResult, error) {
			return backupstore.RemoveExpiry(ctx, b, "backups/x/", &backupstore.ExpiryOptions{Retry: backupstore.Retry{Initial: 10 * time.Millisecond}})
		},
		want: []string{"foreign-new"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			s := testenv.S3(t)
			c := s3Client(t, openStore(t, s))
			tc.initial(t, s.Bucket, c)
			p := proxytest.Start(t, s.Endpoint)
			var lost atomic.Bool
			p.SetLoseAnswer(func(r *http.Request) bool {
				return isLifecycleWrite(r) && lost.CompareAndSwap(false, true)
			}, func(*http.Request) {
				// The other writer reads what the store now holds and adds
				// its rule.
				putRules(t, c, s.Bucket, append(getRules(t, c, s.Bucket), foreignRule("foreign-new", "new/", 7)))
			})
			var writes atomic.Int64
			p.SetFail(func(r *http.Request) bool {
				if isLifecycleWrite(r) {
					writes.Add(1)
				}
				return false
			})
			res, err := tc.call(context.Background(), viaProxy(t, s, p))
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if p.Lost() != 1 {
				t.Fatalf("%d answers lost; want 1", p.Lost())
			}
			if diff := gocmp.Diff(tc.want, ruleIDs(getRules(t, c, s.Bucket))); diff != "" {
				t.Errorf("rules after the call (%d lifecycle writes sent, result %+v) (-want +got):\n%s", writes.Load(), res, diff)
			}
			if !res.Changed {
				t.Errorf("result %+v: want Changed (the write was applied)", res)
			}
		})
	}
}

// TestPruneExpiryKeepsTheRuleWhileMinIOStillHoldsHiddenData: MinIO hides
// the objects a due rule expires from ListObjectsV2 at once and deletes them
// later in its scanner; removing the rule before then brings them back.
// PruneExpiry decides "empty" on ListObjectVersions, which MinIO does not
// filter: while the drive still holds data that plain listings hide, it
// keeps the rule, and it removes the rule once the data is gone.
func TestPruneExpiryKeepsTheRuleWhileMinIOStillHoldsHiddenData(t *testing.T) {
	s := testenv.S3(t)
	b := openStore(t, s)
	c := s3Client(t, b)
	ctx := context.Background()
	fill(t, b, "backups/p/", 2000, 16)
	if _, err := backupstore.ExpirePrefix(ctx, b, "backups/p/", time.Now().AddDate(0, 0, -1), nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for len(snapshot(t, b, "backups/p/")) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("MinIO never hid the expired objects")
		}
		time.Sleep(20 * time.Millisecond)
	}
	onDrive := func() int {
		dirs, _ := filepath.Glob(minioDrive(s.Bucket, "backups", "p"))
		if len(dirs) != 1 {
			return 0
		}
		entries, _ := os.ReadDir(dirs[0])
		return len(entries)
	}
	res, err := backupstore.PruneExpiry(ctx, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if left := onDrive(); left > 0 {
		// The data was there during PruneExpiry's listing.
		if len(res.Rules) != 0 {
			t.Fatalf("PruneExpiry removed %+v while MinIO still held %d hidden objects of the prefix", res.Rules, left)
		}
		t.Logf("the rule stays while MinIO still holds %d objects that plain listings hide", left)
	} else {
		t.Log("MinIO's scanner deleted the data before PruneExpiry listed: the early case was not reached this time")
	}
	for onDrive() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d objects still on MinIO's drive", onDrive())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if _, err := backupstore.PruneExpiry(ctx, b, nil); err != nil {
		t.Fatal(err)
	}
	if rules := getRules(t, c, s.Bucket); len(rules) != 0 {
		t.Errorf("rules left after the data is gone: %v", ruleIDs(rules))
	}
	if n := len(snapshot(t, b, "backups/p/")); n != 0 {
		t.Errorf("%d objects listed again after the rule was removed", n)
	}
}
