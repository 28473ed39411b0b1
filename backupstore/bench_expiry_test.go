package backupstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/proxytest"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// expiryBenchObjects is how many objects BenchmarkExpirePrefix writes under
// each of its two large prefixes: GK_BENCH_EXPIRY_OBJECTS, else 1,000,000.
func expiryBenchObjects(b *testing.B) int {
	s := os.Getenv("GK_BENCH_EXPIRY_OBJECTS")
	if s == "" {
		return 1_000_000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("GK_BENCH_EXPIRY_OBJECTS=%q: want a positive integer", s)
	}
	return n
}

// BenchmarkExpirePrefix is the server-side expiry part of issue 15's
// Performance section, run once: a prefix of a million objects is expired
// by ExpirePrefix (a lifecycle rule MinIO's scanner applies), and a second
// prefix of as many objects is deleted by DeletePrefix, both through the
// counting proxy. ExpirePrefix must send as many requests for the million
// objects as for a prefix of 1,000: its cost does not depend on the count.
// It reports how long writing the objects took, the requests and time of
// each method, and when MinIO stopped listing the expired objects and when
// its drive no longer held them.
func BenchmarkExpirePrefix(b *testing.B) {
	n := expiryBenchObjects(b)
	s := testenv.S3(b)
	p := proxytest.Start(b, s.Endpoint)
	direct := openStore(b, s)
	bucket := viaProxy(b, s, p)
	client := s3Client(b, direct)
	ctx := context.Background()

	start := time.Now()
	putMany(b, client, s.Bucket, "backups/expire/", n)
	putMany(b, client, s.Bucket, "backups/delete/", n)
	putMany(b, client, s.Bucket, "backups/small/", 1000)
	created := time.Since(start)
	b.ReportMetric(float64(2*n+1000)/created.Seconds(), "objects-written/s")
	b.Logf("wrote %d objects of 1 byte (64 PUTs in flight) in %v: %.0f objects/s",
		2*n+1000, created.Round(time.Second), float64(2*n+1000)/created.Seconds())

	at := time.Now().UTC().AddDate(0, 0, -1) // its next midnight is today's, already past
	expire := func(prefix string) (int64, time.Duration) {
		p.ResetCounts()
		start := time.Now()
		res, err := backupstore.ExpirePrefix(ctx, bucket, prefix, at, nil)
		if err != nil || !res.Changed {
			b.Fatalf("ExpirePrefix(%s): %+v, %v", prefix, res, err)
		}
		return p.Requests(), time.Since(start)
	}
	smallReqs, _ := expire("backups/small/")
	reqs, took := expire("backups/expire/")
	b.ReportMetric(float64(reqs), "expire-requests")
	b.ReportMetric(took.Seconds(), "expire-call-s")
	b.Logf("ExpirePrefix: %d requests for %d objects (%d for 1,000), the call took %v", reqs, n, smallReqs, took)
	if reqs != smallReqs {
		b.Errorf("ExpirePrefix sent %d requests for %d objects and %d for 1,000: want the same", reqs, n, smallReqs)
	}

	// MinIO hides the objects a due rule expires, and its scanner deletes
	// their data in the background.
	installed := time.Now()
	deadline := installed.Add(time.Hour)
	for {
		out, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(s.Bucket), Prefix: aws.String("backups/expire/"), MaxKeys: aws.Int32(1)})
		if err != nil {
			b.Fatal(err)
		}
		if len(out.Contents) == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("objects still listed %v after the rule was installed", time.Since(installed))
		}
		time.Sleep(time.Second)
	}
	b.Logf("MinIO no longer lists the expired objects %v after the rule was installed", time.Since(installed).Round(time.Millisecond))

	p.ResetCounts()
	start = time.Now()
	res, err := backupstore.DeletePrefix(ctx, bucket, "backups/delete/", nil)
	if err != nil || res.Deleted != int64(n) {
		b.Fatalf("DeletePrefix: deleted %d of %d: %v", res.Deleted, n, err)
	}
	deleted := time.Since(start)
	b.ReportMetric(deleted.Seconds(), "deleteprefix-s")
	b.ReportMetric(float64(p.Requests()), "deleteprefix-requests")
	b.Logf("DeletePrefix: %d objects in %v, %d requests", n, deleted.Round(time.Millisecond), p.Requests())

	buckets, _ := filepath.Glob(minioDrive(s.Bucket))
	if len(buckets) != 1 {
		b.Logf("MinIO's directory of the bucket: found %v; not waiting for the scanner", buckets)
		return
	}
	for {
		entries, err := os.ReadDir(filepath.Join(buckets[0], "backups", "expire"))
		if errors.Is(err, os.ErrNotExist) || err == nil && len(entries) == 0 {
			break
		}
		if time.Now().After(deadline) {
			b.Logf("MinIO's drive still holds %d of the expired objects %v after the rule was installed", len(entries), time.Since(installed))
			return
		}
		time.Sleep(10 * time.Second)
	}
	b.Logf("MinIO's scanner deleted the expired data by %v after the rule was installed (checked every 10 s, after DeletePrefix)", time.Since(installed).Round(time.Second))
}

// putMany writes n objects of one byte under prefix with 64 PUTs in flight:
// the quickest way to fill a prefix on one MinIO server.
func putMany(b *testing.B, c *s3.Client, bucket, prefix string, n int) {
	b.Helper()
	ctx := context.Background()
	next := make(chan int)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				key := fmt.Sprintf("%s%07d", prefix, i)
				if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader([]byte{'x'})}); err != nil {
					once.Do(func() { first = fmt.Errorf("put %s: %w", key, err) })
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}
