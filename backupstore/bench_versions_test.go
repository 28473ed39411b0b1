package backupstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/proxytest"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// The Performance section of issue 15: deleting 10,000 objects with three
// versions each under a prefix of a versioned MinIO bucket, with
// groundskeeper and with a plain sequential loop of ListObjectVersions and
// DeleteObjects naming each version, directly and through a proxy that adds
// 10 ms to every request. Wanted: at most 0.0025 requests a version, and at
// least 90% of the loop's throughput.
func BenchmarkDeletePrefixVersioned(b *testing.B) {
	const objects, versionsEach = 10_000, 3
	for _, mode := range benchModes {
		s := testenv.S3With(b, testenv.BucketOptions{Versioning: true})
		p := proxytest.Start(b, s.Endpoint)
		p.SetDelay(mode.delay)
		direct := openStore(b, s)
		bucket := viaProxy(b, s, p)
		client := s3Client(b, bucket)
		ctx := context.Background()
		keys := make([]string, objects)
		for i := range keys {
			keys[i] = fmt.Sprintf("backups/v/%05d", i)
		}
		methods := []struct {
			name string
			run  func(b *testing.B) int
		}{
			{"groundskeeper", func(b *testing.B) int {
				res, err := backupstore.DeletePrefix(ctx, bucket, "backups/v/", nil)
				if err != nil || !res.Versioned {
					b.Fatalf("DeletePrefix: %+v, %v", res, err)
				}
				return int(res.Deleted)
			}},
			{"versioned-deleteobjects-loop", func(b *testing.B) int {
				n := 0
				for {
					out, err := client.ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: aws.String(s.Bucket), Prefix: aws.String("backups/v/")})
					if err != nil {
						b.Fatal(err)
					}
					var ids []s3types.ObjectIdentifier
					for _, v := range out.Versions {
						ids = append(ids, s3types.ObjectIdentifier{Key: v.Key, VersionId: v.VersionId})
					}
					for _, m := range out.DeleteMarkers {
						ids = append(ids, s3types.ObjectIdentifier{Key: m.Key, VersionId: m.VersionId})
					}
					if len(ids) == 0 {
						return n
					}
					if _, err := client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(s.Bucket), Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)}}); err != nil {
						b.Fatal(err)
					}
					n += len(ids)
				}
			}},
		}
		rates := map[string]float64{}
		for _, m := range methods {
			b.Run(mode.name+"/"+m.name, func(b *testing.B) {
				var n int
				var elapsed time.Duration
				var reqs int64
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					start := time.Now()
					for v := range versionsEach {
						put(b, direct, keys, benchSize+v)
					}
					b.Logf("fill: %d versions in %v", objects*versionsEach, time.Since(start))
					p.ResetCounts()
					start = time.Now()
					b.StartTimer()
					n += m.run(b)
					b.StopTimer()
					elapsed += time.Since(start)
					reqs += p.Requests()
				}
				rate := float64(n) / elapsed.Seconds()
				rates[m.name] = rate
				b.ReportMetric(rate, "versions/s")
				b.ReportMetric(float64(reqs)/float64(n), "requests/version")
				if m.name == "groundskeeper" && float64(reqs)/float64(n) > 0.0025 {
					b.Errorf("%s: %.5f requests a version, want at most 0.0025", mode.name, float64(reqs)/float64(n))
				}
				b.Logf("%s/%s: %d versions in %v: %.0f versions/s, %.5f requests/version", mode.name, m.name, n, elapsed, rate, float64(reqs)/float64(n))
			})
		}
		if gk, loop := rates["groundskeeper"], rates["versioned-deleteobjects-loop"]; gk > 0 && loop > 0 {
			b.Logf("%s: groundskeeper / versioned-deleteobjects-loop = %.2f", mode.name, gk/loop)
			if gk/loop < 0.9 {
				b.Errorf("%s: groundskeeper deletes versions at %.2f× the loop's rate, want at least 0.9×", mode.name, gk/loop)
			}
		}
	}
}
