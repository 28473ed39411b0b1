package backupstore_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"gocloud.dev/blob"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/proxytest"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// The Performance section of issue 9: deleting 10,000 objects of 128 bytes
// under a prefix on MinIO, directly and through a proxy that adds 10 ms to
// every request, with groundskeeper, a naive gocloud loop, rclone delete
// and a plain sequential DeleteObjects loop. "direct" goes through the same
// counting proxy with no delay, so that every method's requests are counted
// the same way.

const (
	benchObjects   = 10_000
	benchSize      = 128
	naiveProxyKeys = 1_000 // the naive loop at 10 ms needs ~20 ms an object: measured on 1,000
)

type benchMode struct {
	name  string
	delay time.Duration
}

var benchModes = []benchMode{{"direct", 0}, {"proxy10ms", 10 * time.Millisecond}}

func rclonePath(b *testing.B) string {
	b.Helper()
	for _, p := range []string{"../.cache/bin/rclone", "/usr/bin/rclone"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	b.Skip("rclone not installed")
	return ""
}

// rcloneEnv configures the remotes src: and dst: for the S3 endpoint. The
// two names keep rclone from copying server-side, so that it streams as
// CopyBackups does. AWS_CA_BUNDLE breaks rclone's S3 backend here.
func rcloneEnv(endpoint string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_CA_BUNDLE=") {
			env = append(env, kv)
		}
	}
	for _, r := range []string{"SRC", "DST"} {
		p := "RCLONE_CONFIG_" + r + "_"
		env = append(env, p+"TYPE=s3", p+"PROVIDER=Minio", p+"ACCESS_KEY_ID="+testenv.S3AccessKeyID,
			p+"SECRET_ACCESS_KEY="+testenv.S3SecretAccessKey, p+"REGION="+testenv.S3Region, p+"ENDPOINT="+endpoint)
	}
	return env
}

func BenchmarkDeletePrefix(b *testing.B) {
	rates := map[string]float64{}
	var mu sync.Mutex
	for _, mode := range benchModes {
		s := testenv.S3(b)
		p := proxytest.Start(b, s.Endpoint)
		p.SetDelay(mode.delay)
		direct := openStore(b, s)
		bucket := viaProxy(b, s, p)
		var client *s3.Client
		bucket.As(&client)
		ctx := context.Background()
		methods := []struct {
			name string
			run  func(b *testing.B) int // returns objects deleted
		}{
			{"groundskeeper", func(b *testing.B) int {
				res, err := backupstore.DeletePrefix(ctx, bucket, "backups/a/", nil)
				if err != nil {
					b.Fatal(err)
				}
				return int(res.Deleted)
			}},
			{"deleteobjects-loop", func(b *testing.B) int {
				n := 0
				for {
					out, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(s.Bucket), Prefix: aws.String("backups/a/")})
					if err != nil {
						b.Fatal(err)
					}
					if len(out.Contents) == 0 {
						return n
					}
					ids := make([]s3types.ObjectIdentifier, len(out.Contents))
					for i, o := range out.Contents {
						ids[i] = s3types.ObjectIdentifier{Key: o.Key}
					}
					if _, err := client.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(s.Bucket), Delete: &s3types.Delete{Objects: ids, Quiet: aws.Bool(true)}}); err != nil {
						b.Fatal(err)
					}
					n += len(ids)
				}
			}},
			{"naive-gocloud", func(b *testing.B) int {
				limit := benchObjects
				if mode.delay > 0 {
					limit = naiveProxyKeys
				}
				it := bucket.List(&blob.ListOptions{Prefix: "backups/a/"})
				var keys []string
				for len(keys) < limit {
					o, err := it.Next(ctx)
					if err != nil {
						break
					}
					keys = append(keys, o.Key)
				}
				for _, k := range keys {
					if err := bucket.Delete(ctx, k); err != nil {
						b.Fatal(err)
					}
				}
				return len(keys)
			}},
			{"rclone-delete", func(b *testing.B) int {
				cmd := exec.Command(rclonePath(b), "delete", "src:"+s.Bucket+"/backups/a/")
				cmd.Env = rcloneEnv(p.URL)
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("rclone delete: %v\n%s", err, out)
				}
				return benchObjects
			}},
		}
		for _, m := range methods {
			b.Run(mode.name+"/"+m.name, func(b *testing.B) {
				var objs int
				var elapsed time.Duration
				var reqs int64
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					backupstore.DeletePrefix(ctx, direct, "backups/a/", nil)
					fill(b, direct, "backups/a/", benchObjects, benchSize)
					p.ResetCounts()
					start := time.Now()
					b.StartTimer()
					objs += m.run(b)
					b.StopTimer()
					elapsed += time.Since(start)
					reqs += p.Requests()
				}
				rate := float64(objs) / elapsed.Seconds()
				b.ReportMetric(rate, "objects/s")
				b.ReportMetric(float64(reqs)/float64(objs), "requests/object")
				mu.Lock()
				rates[mode.name+"/"+m.name] = rate
				mu.Unlock()
				b.Logf("%s/%s: %d objects in %v: %.0f objects/s, %.4f requests/object", mode.name, m.name, objs, elapsed, rate, float64(reqs)/float64(objs))
			})
		}
		b.Run(mode.name+"/ratios", func(b *testing.B) {
			mu.Lock()
			defer mu.Unlock()
			gk := rates[mode.name+"/groundskeeper"]
			for _, other := range []string{"deleteobjects-loop", "naive-gocloud", "rclone-delete"} {
				if r := rates[mode.name+"/"+other]; r > 0 && gk > 0 {
					b.ReportMetric(gk/r, "x-"+other)
					b.Logf("%s: groundskeeper / %s = %.2f", mode.name, other, gk/r)
				}
			}
		})
	}
}

// BenchmarkCopy copies 1,000 objects of 64 KiB between two MinIO buckets,
// with CopyBackups and with rclone copy, directly and through the proxy.
func BenchmarkCopy(b *testing.B) {
	const n, size = 1000, 64 << 10
	for _, mode := range benchModes {
		src, dst := testenv.S3(b), testenv.S3(b)
		p := proxytest.Start(b, src.Endpoint)
		p.SetDelay(mode.delay)
		fill(b, openStore(b, src), "backups/", n, size)
		srcB, dstB := viaProxy(b, src, p), viaProxy(b, dst, p)
		directDst := openStore(b, dst)
		ctx := context.Background()
		rates := map[string]float64{}
		for _, m := range []struct {
			name string
			run  func(b *testing.B)
		}{
			{"groundskeeper", func(b *testing.B) {
				res, err := backupstore.CopyBackups(ctx, srcB, dstB, &backupstore.CopyOptions{Concurrency: 16})
				if err != nil || res.Copied != n {
					b.Fatalf("%+v, %v", res.CopyProgress, err)
				}
			}},
			{"rclone-copy", func(b *testing.B) {
				cmd := exec.Command(rclonePath(b), "copy", "--transfers", "16", "src:"+src.Bucket+"/backups/", "dst:"+dst.Bucket+"/backups/")
				cmd.Env = rcloneEnv(p.URL)
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("rclone copy: %v\n%s", err, out)
				}
			}},
		} {
			b.Run(mode.name+"/"+m.name, func(b *testing.B) {
				var elapsed time.Duration
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					backupstore.DeletePrefix(ctx, directDst, "backups/", nil)
					start := time.Now()
					b.StartTimer()
					m.run(b)
					b.StopTimer()
					elapsed += time.Since(start)
				}
				rate := float64(n*b.N) / elapsed.Seconds()
				rates[m.name] = rate
				b.ReportMetric(rate, "objects/s")
				b.ReportMetric(rate*size/(1<<20), "MiB/s")
				b.Logf("%s/%s: %.0f objects/s, %.1f MiB/s", mode.name, m.name, rate, rate*size/(1<<20))
			})
		}
		if rates["rclone-copy"] > 0 {
			b.Logf("%s: groundskeeper / rclone copy = %.2f", mode.name, rates["groundskeeper"]/rates["rclone-copy"])
		}
	}
}

var _ = fmt.Sprint
