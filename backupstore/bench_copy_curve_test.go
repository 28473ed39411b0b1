package backupstore_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/proxytest"
	"github.com/groundskeeper-io/groundskeeper/internal/benchcurve"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// pprofTotal returns the total of a heap profile's alloc_space samples, as
// go tool pprof reports it.
func pprofTotal(tb testing.TB, profile string) uint64 {
	tb.Helper()
	out, err := exec.Command("go", "tool", "pprof", "-sample_index=alloc_space", "-top", "-nodecount=1", profile).CombinedOutput()
	if err != nil {
		tb.Logf("go tool pprof: %v\n%s", err, out)
		return 0
	}
	m := regexp.MustCompile(`of ([0-9.]+)([kMGT]?B) total`).FindSubmatch(out)
	if m == nil {
		tb.Logf("go tool pprof: no total in\n%s", out)
		return 0
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	unit := map[string]float64{"B": 1, "kB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}[string(m[2])]
	return uint64(v * unit)
}

// copyProcessEnv names the variables that make TestCopyProcess copy: the
// source and target bucket URLs (S3, the test's credentials), and where it
// writes its heap profile.
const (
	copyProcessSrc     = "BACKUPSTORE_COPY_PROCESS_SRC"
	copyProcessDst     = "BACKUPSTORE_COPY_PROCESS_DST"
	copyProcessProfile = "BACKUPSTORE_COPY_PROCESS_PROFILE"
)

// TestCopyProcess is not a test: BenchmarkCopyCurve runs the test binary
// again with it, so that CopyBackups' bytes allocated are measured as
// rclone's are, from the heap profile of a process that does nothing else
// (in the benchmark's own process, the proxy's allocations would count
// too). Without its variables it returns at once.
func TestCopyProcess(t *testing.T) {
	src, dst, profile := os.Getenv(copyProcessSrc), os.Getenv(copyProcessDst), os.Getenv(copyProcessProfile)
	if src == "" || dst == "" || profile == "" {
		return
	}
	ctx := context.Background()
	res, err := backupstore.CopyBackups(ctx, openURL(t, src, credsFor("s3")), openURL(t, dst, credsFor("s3")), &backupstore.CopyOptions{Concurrency: 16})
	if err != nil {
		t.Fatalf("%+v, %v", res.CopyProgress, err)
	}
	f, err := os.Create(profile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
}

// copyProcessAlloc runs CopyBackups from src to dst in a process of its
// own (TestCopyProcess) and returns the bytes it allocated.
func copyProcessAlloc(b *testing.B, src, dst string) uint64 {
	b.Helper()
	prof := filepath.Join(b.TempDir(), "copy.pprof")
	cmd := exec.Command(os.Args[0], "-test.run=^TestCopyProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), copyProcessSrc+"="+src, copyProcessDst+"="+dst, copyProcessProfile+"="+prof)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("CopyBackups in a process of its own: %v\n%s", err, out)
	}
	return pprofTotal(b, prof)
}

// BenchmarkCopyCurve is the CopyBackups curve of issue 28: 1,000 objects of
// 64 KiB and 100 of 16 MiB copied between two MinIO buckets, directly and
// through the proxy that adds 10 ms to every request, by CopyBackups
// (concurrency 16) and by rclone copy (--transfers 16). The size of the
// curve is the object size; the rates are per object. The bytes allocated
// are the alloc_space total of a heap profile of a process that only
// copies, for both: rclone's --memprofile, and CopyBackups run again in a
// process of its own (TestCopyProcess); time, requests and peak heap are
// those of the run in the benchmark's process.
func BenchmarkCopyCurve(b *testing.B) {
	curve := &benchcurve.Curve{Name: "copy", Item: "object", Size: "object size (bytes)"}
	ctx := context.Background()
	rates := map[string]float64{}
	allocs := map[string]uint64{}
	for _, sz := range []struct{ n, size int }{{1000, 64 << 10}, {100, 16 << 20}} {
		for _, mode := range benchModes {
			src, dst := testenv.S3(b), testenv.S3(b)
			p := proxytest.Start(b, src.Endpoint)
			start := time.Now()
			fill(b, openStore(b, src), "backups/", sz.n, sz.size)
			curve.Note("%d objects of %d bytes created in %.1f s", sz.n, sz.size, time.Since(start).Seconds())
			p.SetDelay(mode.delay)
			srcB, dstB := viaProxy(b, src, p), viaProxy(b, dst, p)
			directDst := openStore(b, dst)
			for _, m := range []struct {
				name string
				run  func(b *testing.B) (alloc uint64)
			}{
				{"groundskeeper", func(b *testing.B) uint64 {
					res, err := backupstore.CopyBackups(ctx, srcB, dstB, &backupstore.CopyOptions{Concurrency: 16})
					if err != nil || res.Copied != sz.n {
						b.Fatalf("%+v, %v", res.CopyProgress, err)
					}
					return 0
				}},
				{"rclone", func(b *testing.B) uint64 {
					prof := filepath.Join(b.TempDir(), "mem.pprof")
					cmd := exec.Command(rclonePath(b), "copy", "--transfers", "16", "--memprofile", prof, "src:"+src.Bucket+"/backups/", "dst:"+dst.Bucket+"/backups/")
					cmd.Env = rcloneEnv(p.URL)
					if out, err := cmd.CombinedOutput(); err != nil {
						b.Fatalf("rclone copy: %v\n%s", err, out)
					}
					if _, err := os.Stat(prof); err != nil {
						return 0
					}
					return pprofTotal(b, prof)
				}},
			} {
				series := m.name + " " + mode.name
				b.Run(fmt.Sprintf("%s/%s/size=%d", mode.name, m.name, sz.size), func(b *testing.B) {
					backupstore.DeletePrefix(ctx, directDst, "backups/", nil)
					p.ResetCounts()
					heap := benchcurve.StartHeap()
					start := time.Now()
					alloc := m.run(b)
					elapsed := time.Since(start)
					peak, _ := heap.Stop()
					requests := p.Requests()
					if m.name == "groundskeeper" {
						backupstore.DeletePrefix(ctx, directDst, "backups/", nil)
						alloc = copyProcessAlloc(b, strings.Replace(src.URL, src.Endpoint, p.URL, 1), strings.Replace(dst.URL, dst.Endpoint, p.URL, 1))
					} else {
						peak = 0 // another process
					}
					key := fmt.Sprintf("%s/%d", series, sz.size)
					rates[key] = float64(sz.n) / elapsed.Seconds()
					allocs[key] = alloc / uint64(sz.n)
					curve.Add(b, benchcurve.Point{Series: series, Size: sz.size, Items: sz.n, Seconds: elapsed.Seconds(),
						Requests: requests, PeakHeap: peak, AllocBytes: alloc})
					b.ReportMetric(float64(sz.n*sz.size)/elapsed.Seconds()/(1<<20), "MiB/s")
				})
			}
		}
		for _, mode := range benchModes {
			gk, rc := fmt.Sprintf("groundskeeper %s/%d", mode.name, sz.size), fmt.Sprintf("rclone %s/%d", mode.name, sz.size)
			if rates[rc] > 0 {
				curve.Note("%d x %d bytes, %s: CopyBackups / rclone copy = %.2fx (target %s); allocated %d vs %d KiB an object",
					sz.n, sz.size, mode.name, rates[gk]/rates[rc], map[bool]string{true: ">= 1.0", false: ">= 1.5"}[mode.delay == 0],
					allocs[gk]>>10, allocs[rc]>>10)
			}
		}
	}
	curve.Note("physical limit: loopback bandwidth and MinIO's CPU on this machine; through the proxy, 10 ms a request: 16 objects in flight copy at most 1,600 objects/s, less the requests each object needs")
	curve.Write(b)
}
