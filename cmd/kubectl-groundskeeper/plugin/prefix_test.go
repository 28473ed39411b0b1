package plugin_test

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"gocloud.dev/blob"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/cmd/kubectl-groundskeeper/plugin"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// at is the address of prefix p of s's bucket: its URL with the prefix
// after the bucket, before the query.
func at(s *testenv.BlobStore, p string) string {
	base, query, _ := strings.Cut(s.URL, "?")
	return base + "/" + p + "?" + query
}

func write(t *testing.T, b *blob.Bucket, keys map[string]string) {
	t.Helper()
	for k, v := range keys {
		if err := b.WriteAll(context.Background(), k, []byte(v), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// keys lists every key of the bucket.
func keys(t *testing.T, b *blob.Bucket) []string {
	t.Helper()
	var ks []string
	it := b.List(nil)
	for {
		o, err := it.Next(context.Background())
		if err != nil {
			break
		}
		ks = append(ks, o.Key)
	}
	slices.Sort(ks)
	return ks
}

// variable are the parts of prefix's output that change from run to run:
// times, version IDs and the bucket's address.
var variable = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ|"[^"]*Z"|s3://[^\s"]+|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

func TestPrefix(t *testing.T) {
	s := testenv.S3With(t, testenv.BucketOptions{ObjectLock: true})
	b := s.Open(t)
	ctx := context.Background()
	write(t, b, map[string]string{"db/a": "1", "db/b": "22", "db/sub/c": "333", "db2/x": "sibling", "other/y": "4444"})
	write(t, b, map[string]string{"db/a": "11111"}) // a second version of db/a
	if err := b.Delete(ctx, "db/b"); err != nil {   // a delete marker over db/b
		t.Fatal(err)
	}
	var c *s3.Client
	if !b.As(&c) {
		t.Fatal("no S3 client")
	}
	head, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String("db/sub/c")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObjectRetention(ctx, &s3.PutObjectRetentionInput{
		Bucket: aws.String(s.Bucket), Key: aws.String("db/sub/c"), VersionId: head.VersionId,
		Retention: &s3types.ObjectLockRetention{Mode: s3types.ObjectLockRetentionModeGovernance, RetainUntilDate: aws.Time(time.Now().Add(time.Hour))},
	}); err != nil {
		t.Fatal(err)
	}
	bucket, err := backupstore.OpenBucket(ctx, s.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	if _, err := backupstore.ExpirePrefix(ctx, bucket, "db/", t0.AddDate(1, 0, 0), nil); err != nil {
		t.Fatal(err)
	}

	r := run(t, plugin.Options{}, "prefix", at(s, "db/"))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.err)
	}
	golden(t, "prefix.txt", variable.ReplaceAllString(r.out, "X"), nil)
	r = run(t, plugin.Options{}, "prefix", at(s, "db/"), "-o", "json")
	golden(t, "prefix.json", variable.ReplaceAllString(r.out, "X"), nil)
	if got, want := keys(t, b), []string{"db/a", "db/sub/c", "db2/x", "other/y"}; !slices.Equal(got, want) {
		t.Errorf("after prefix, the bucket holds %q, want %q", got, want)
	}

	t.Run("credentials from a Secret", func(t *testing.T) {
		k := testenv.StartKubernetes(t)
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3-creds"}, StringData: map[string]string{
			backupstore.SecretKeyAccessKeyID: envOrFail(t, "AWS_ACCESS_KEY_ID"), "secretAccessKey": envOrFail(t, "AWS_SECRET_ACCESS_KEY")}}
		if _, err := k.Client.CoreV1().Secrets(k.Namespace).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		r := run(t, plugin.Options{}, kube(k, "prefix", at(s, "db/"), "--secret", "s3-creds")...)
		if r.code != 0 || !strings.Contains(r.out, "OBJECTS") {
			t.Errorf("exit %d:\n%s%s", r.code, r.out, r.err)
		}
		oneLineError(t, run(t, plugin.Options{}, kube(k, "prefix", at(s, "db/"), "--secret", k.Namespace+"/no-such-secret")...),
			plugin.ExitError, "--secret "+k.Namespace+"/no-such-secret")
	})
}

func envOrFail(t *testing.T, name string) string {
	t.Helper()
	v, ok := os.LookupEnv(name)
	if !ok {
		t.Fatalf("%s is not set: testenv sets it when MinIO starts", name)
	}
	return v
}

// TestPrefixRm deletes db/ and nothing else: db2/ and dbx share its
// leading characters, and survive.
func TestPrefixRm(t *testing.T) {
	s := testenv.S3(t)
	b := s.Open(t)
	write(t, b, map[string]string{"db/1": "a", "db/2": "bb", "db/sub/3": "ccc", "db2/keep": "d", "dbx": "e"})
	all := []string{"db/1", "db/2", "db/sub/3", "db2/keep", "dbx"}

	t.Run("a dry run without --yes", func(t *testing.T) {
		r := run(t, plugin.Options{}, "prefix", "rm", at(s, "db/"))
		if r.code != 0 || !strings.Contains(r.out, "delete 3 objects (6 bytes)") || !strings.Contains(r.out, "dry run: nothing deleted") {
			t.Errorf("exit %d, no plan and dry run:\n%s", r.code, r.out)
		}
		if got := keys(t, b); !slices.Equal(got, all) {
			t.Errorf("after a dry run the bucket holds %q, want %q", got, all)
		}
	})
	t.Run("refused prefixes", func(t *testing.T) {
		for _, c := range []struct{ prefix, want string }{
			{"db", `prefix "db"`},
			{"", `prefix ""`},
			{"/db/", `prefix "/db/"`},
			{"db//", `prefix "db//"`},
			{"db/../", `prefix "db/../"`},
		} {
			oneLineError(t, run(t, plugin.Options{}, "prefix", "rm", at(s, c.prefix), "--yes"), plugin.ExitUsage, c.want)
		}
		if got := keys(t, b); !slices.Equal(got, all) {
			t.Errorf("after refused deletions the bucket holds %q, want %q", got, all)
		}
	})
	t.Run("--yes deletes the prefix alone", func(t *testing.T) {
		r := run(t, plugin.Options{}, "prefix", "rm", at(s, "db/"), "--yes")
		if r.code != 0 || !strings.Contains(r.out, "deleted 3 objects (6 bytes)") {
			t.Errorf("exit %d:\n%s%s", r.code, r.out, r.err)
		}
		if got, want := keys(t, b), []string{"db2/keep", "dbx"}; !slices.Equal(got, want) {
			t.Errorf("after rm db/ the bucket holds %q, want %q", got, want)
		}
		r = run(t, plugin.Options{}, "prefix", "rm", at(s, "db/"), "--yes")
		if r.code != 0 || !strings.Contains(r.out, "nothing to do") {
			t.Errorf("rm of an empty prefix: exit %d:\n%s", r.code, r.out)
		}
	})
	t.Run("bad URL", func(t *testing.T) {
		oneLineError(t, run(t, plugin.Options{}, "prefix", "rm", "backups/db/"), plugin.ExitUsage, `"backups/db/"`, "no scheme")
		oneLineError(t, run(t, plugin.Options{}, "prefix", "file:///tmp/b/db/"), plugin.ExitUsage, `"file:///tmp/b/db/"`)
	})
}

func TestPrefixRmAsksOnATerminal(t *testing.T) {
	s := testenv.S3(t)
	b := s.Open(t)
	write(t, b, map[string]string{"db/1": "a", "db/2": "bb", "db2/keep": "d"})

	t.Run("no", func(t *testing.T) {
		tm, typeIn, done := onTerminal(t, plugin.Options{}, "prefix", "rm", at(s, "db/"))
		tm.waitFor(t, "delete 2 objects (3 bytes)? [y/N] ", done)
		typeIn("n\r")
		if code := <-done; code != 0 {
			t.Errorf("exit %d", code)
		}
		tm.waitFor(t, "dry run: nothing deleted", nil)
		if got, want := keys(t, b), []string{"db/1", "db/2", "db2/keep"}; !slices.Equal(got, want) {
			t.Errorf("answered no, the bucket holds %q, want %q", got, want)
		}
	})
	t.Run("changed since the question", func(t *testing.T) {
		tm, typeIn, done := onTerminal(t, plugin.Options{}, "prefix", "rm", at(s, "db/"))
		tm.waitFor(t, "delete 2 objects (3 bytes)? [y/N] ", done)
		write(t, b, map[string]string{"db/3": "new"})
		typeIn("y\r")
		if code := <-done; code != plugin.ExitError {
			t.Errorf("exit %d, want %d", code, plugin.ExitError)
		}
		if got, want := keys(t, b), []string{"db/1", "db/2", "db/3", "db2/keep"}; !slices.Equal(got, want) {
			t.Errorf("the prefix changed after the question, yet the bucket holds %q, want %q", got, want)
		}
	})
	t.Run("yes", func(t *testing.T) {
		tm, typeIn, done := onTerminal(t, plugin.Options{}, "prefix", "rm", at(s, "db/"))
		tm.waitFor(t, "delete 3 objects (6 bytes)? [y/N] ", done)
		typeIn("y\r")
		if code := <-done; code != 0 {
			t.Errorf("exit %d", code)
		}
		tm.waitFor(t, "3/3 objects, 6 bytes deleted", nil)
		tm.waitFor(t, "deleted 3 objects (6 bytes)", nil)
		if got, want := keys(t, b), []string{"db2/keep"}; !slices.Equal(got, want) {
			t.Errorf("answered yes, the bucket holds %q, want %q", got, want)
		}
		t.Logf("the terminal showed:\n%s", tm.screen())
	})
}
