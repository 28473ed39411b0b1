package backupstore_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/proxytest"
	"github.com/groundskeeper-io/groundskeeper/internal/benchcurve"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// freeDisk returns the bytes free on the file system of dir.
func freeDisk(tb testing.TB, dir string) uint64 {
	tb.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		tb.Fatal(err)
	}
	return st.Bavail * uint64(st.Bsize)
}

// fillFast writes n empty objects prefix+"%07d" with PutObject, 64 at a
// time, and returns how long it took.
func fillFast(tb testing.TB, c *s3.Client, bucket, prefix string, n int) time.Duration {
	tb.Helper()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	var failed atomic.Value
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				_, err := c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket),
					Key: aws.String(fmt.Sprintf("%s%07d", prefix, i)), Body: bytes.NewReader(nil)})
				if err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		tb.Fatalf("fill: %v", err)
	}
	return time.Since(start)
}

// batchDriver is s5cmd's design, the server's limit in this benchmark:
// keys listed beforehand (not timed), then DeleteObjects of 1,000 keys with
// workers requests in flight.
func batchDriver(ctx context.Context, c *s3.Client, bucket string, keys []string, workers int) error {
	work := make(chan []string)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for batch := range work {
				ids := make([]s3types.ObjectIdentifier, len(batch))
				for i, k := range batch {
					ids[i] = s3types.ObjectIdentifier{Key: aws.String(k)}
				}
				out, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket),
					Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
				if err == nil && len(out.Errors) > 0 {
					err = fmt.Errorf("%d keys failed, first %s: %s", len(out.Errors), aws.ToString(out.Errors[0].Key), aws.ToString(out.Errors[0].Message))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 0; i < len(keys); i += 1000 {
		work <- keys[i:min(i+1000, len(keys))]
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

// listKeys lists every key under prefix.
func listKeys(tb testing.TB, c *s3.Client, bucket, prefix string) []string {
	tb.Helper()
	var keys []string
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		out, err := p.NextPage(context.Background())
		if err != nil {
			tb.Fatal(err)
		}
		for _, o := range out.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}

// BenchmarkDeletePrefixCurve is the DeletePrefix curve of issue 28 on
// MinIO: 10,000, 100,000 and 1,000,000 empty objects under a prefix,
// deleted by the batch driver (the server's limit: s5cmd's design, keys
// listed beforehand, DeleteObjects of 1,000 with the best concurrency of a
// sweep at 10,000), by DeletePrefix with that concurrency (listing as it
// deletes, the difference measured), and at 10,000 only by DeletePrefix
// with its defaults (4 requests in flight, chosen for S3's limit of 3,500
// deletes a second per prefix) and by a plain loop (list 1,000, delete
// them, again). A size whose objects would not fit on the disk (MinIO
// needs about 12 KiB an object) is left out, and the note says so. Every
// request of a deletion goes through the counting proxy with no delay. The
// objects are created with PutObject 64 at a time, straight to MinIO and not
// timed (the note says how long it took), once for each series: at
// 1,000,000 objects the two fills take about half an hour. The batch
// driver's listing is not timed either; the note says how long it took,
// since DeletePrefix lists as it deletes.
func BenchmarkDeletePrefixCurve(b *testing.B) {
	curve := &benchcurve.Curve{Name: "deleteprefix", Item: "object"}
	s := testenv.S3(b)
	p := proxytest.Start(b, s.Endpoint)
	bucket := viaProxy(b, s, p)
	client := s3Client(b, bucket)
	filler := s3Client(b, openStore(b, s))
	ctx := context.Background()
	const prefix = "backups/a/"

	// The sweep: the driver's concurrency that deletes 10,000 objects
	// fastest.
	best, bestRate := 0, 0.0
	for _, w := range []int{4, 8, 16, 32} {
		fillFast(b, filler, s.Bucket, prefix, 10_000)
		keys := listKeys(b, client, s.Bucket, prefix)
		start := time.Now()
		if err := batchDriver(ctx, client, s.Bucket, keys, w); err != nil {
			b.Fatal(err)
		}
		rate := float64(len(keys)) / time.Since(start).Seconds()
		curve.Note("sweep: batch driver at concurrency %d: %.0f objects/s (10,000 objects)", w, rate)
		if rate > bestRate {
			best, bestRate = w, rate
		}
	}

	for _, n := range benchcurve.Sizes(10_000, 100_000, 1_000_000) {
		// MinIO keeps a directory and a metadata file for each object,
		// about 12 KiB on disk even when it is empty.
		if need, free := uint64(n)*12<<10, freeDisk(b, os.TempDir()); need > free {
			curve.Note("%d objects not run: MinIO needs about %.1f GiB of disk for them, %.1f GiB are free", n, float64(need)/(1<<30), float64(free)/(1<<30))
			continue
		}
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			measure := func(series string, run func() (int, error)) {
				took := fillFast(b, filler, s.Bucket, prefix, n)
				curve.Note("%d objects created in %.1f s (%.0f/s) before %s", n, took.Seconds(), float64(n)/took.Seconds(), series)
				var keys []string
				if series == "batch driver" {
					start := time.Now()
					keys = listKeys(b, client, s.Bucket, prefix)
					took := time.Since(start)
					curve.Note("%d keys listed beforehand for the batch driver in %.1f s (%.0f/s), not timed", n, took.Seconds(), float64(n)/took.Seconds())
					run = func() (int, error) { return len(keys), batchDriver(ctx, client, s.Bucket, keys, best) }
				}
				p.ResetCounts()
				heap := benchcurve.StartHeap()
				start := time.Now()
				deleted, err := run()
				elapsed := time.Since(start)
				peak, alloc := heap.Stop()
				if err != nil {
					b.Fatalf("%s: %v", series, err)
				}
				if deleted != n {
					b.Fatalf("%s deleted %d of %d", series, deleted, n)
				}
				curve.Add(b, benchcurve.Point{Series: series, Size: n, Seconds: elapsed.Seconds(), Requests: p.Requests(), PeakHeap: peak, AllocBytes: alloc})
				b.ReportMetric(float64(n)/elapsed.Seconds(), strings.ReplaceAll(series, " ", "-")+"-objects/s")
			}
			measure("groundskeeper", func() (int, error) {
				res, err := backupstore.DeletePrefix(ctx, bucket, prefix, &backupstore.DeleteOptions{Concurrency: best})
				return int(res.Deleted), err
			})
			if n <= 10_000 {
				measure("groundskeeper default", func() (int, error) {
					res, err := backupstore.DeletePrefix(ctx, bucket, prefix, nil)
					return int(res.Deleted), err
				})
			}
			measure("batch driver", nil)
			if n <= 10_000 {
				measure("plain loop", func() (int, error) {
					deleted := 0
					for {
						out, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(s.Bucket), Prefix: aws.String(prefix)})
						if err != nil || len(out.Contents) == 0 {
							return deleted, err
						}
						ids := make([]s3types.ObjectIdentifier, len(out.Contents))
						for i, o := range out.Contents {
							ids[i] = s3types.ObjectIdentifier{Key: o.Key}
						}
						if _, err := client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(s.Bucket), Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)}}); err != nil {
							return deleted, err
						}
						deleted += len(ids)
					}
				})
			}
		})
	}
	for _, n := range benchcurve.Sizes(10_000, 100_000, 1_000_000) {
		gk, ok1 := curve.Find("groundskeeper", n)
		lim, ok2 := curve.Find("batch driver", n)
		if ok1 && ok2 {
			limRate := float64(n) / lim.Seconds
			curve.Note("target >= 90%% of the server's limit: at %d objects, DeletePrefix %.0f/s, batch driver %.0f/s: %.0f%%", n, float64(n)/gk.Seconds, limRate, 100*(float64(n)/gk.Seconds)/limRate)
		}
	}
	if small, ok := curve.Find("groundskeeper", 10_000); ok {
		if big, ok := curve.Find("groundskeeper", 1_000_000); ok {
			curve.Note("target: throughput at 1M >= 90%% of 10k: %.0f vs %.0f objects/s (%.0f%%); peak heap at 1M %.1f MiB (target <= 64)",
				1e6/big.Seconds, 1e4/small.Seconds, 100*(1e6/big.Seconds)/(1e4/small.Seconds), float64(big.PeakHeap)/(1<<20))
		}
	}
	curve.Note("physical limit: S3 accepts at least 3,500 deletes/s per partitioned prefix, so 1M objects take at least ~290 s there; on this MinIO the limit is the batch driver (concurrency %d)", best)
	curve.Write(b)
}
