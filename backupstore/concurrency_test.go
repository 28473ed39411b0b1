package backupstore_test

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"gocloud.dev/blob"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/proxytest"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// TestDeletePrefixStartsWorkersAsWorkAppears: deleting one object with the
// largest Concurrency starts goroutines as batches are listed, not
// MaxConcurrency of them up front. The count is taken twice: while the
// store holds the listing request (nothing to delete yet), and while it
// holds the one DeleteObjects request.
func TestDeletePrefixStartsWorkersAsWorkAppears(t *testing.T) {
	s := testenv.S3(t)
	put(t, openStore(t, s), []string{"backups/one/00001"}, 16)
	p := proxytest.Start(t, s.Endpoint)
	b := viaProxy(t, s, p)
	type hold struct {
		arrived, release chan struct{}
		once             sync.Once
	}
	listing := &hold{arrived: make(chan struct{}), release: make(chan struct{})}
	deleting := &hold{arrived: make(chan struct{}), release: make(chan struct{})}
	p.SetHandler(func(w http.ResponseWriter, r *http.Request) bool {
		h := deleting
		if r.Method == http.MethodGet && r.URL.Query().Has("list-type") {
			h = listing
		} else if !isDeleteObjects(r) {
			return false
		}
		h.once.Do(func() { close(h.arrived) })
		<-h.release
		return false
	})
	runtime.GC()
	before := runtime.NumGoroutine()
	done := make(chan error, 1)
	go func() {
		_, err := backupstore.DeletePrefix(context.Background(), b, "backups/one/", &backupstore.DeleteOptions{Concurrency: backupstore.MaxConcurrency})
		done <- err
	}()
	// The deletion's own goroutine, the progress notifier, and the HTTP
	// client's and the proxy's connections: a few dozen at most.
	const few = 40
	for _, h := range []struct {
		name string
		*hold
	}{{"the listing request", listing}, {"the one DeleteObjects request", deleting}} {
		<-h.arrived
		during := runtime.NumGoroutine()
		close(h.release)
		t.Logf("%d goroutines before, %d while the store held %s", before, during, h.name)
		if extra := during - before; extra > few {
			t.Errorf("%d goroutines more while the store held %s, deleting one object with Concurrency %d; want a few", extra, h.name, backupstore.MaxConcurrency)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestConcurrencyOutOfBoundsIsRefused: a Concurrency above MaxConcurrency
// or below zero is refused before any request, with ErrInvalidConfig
// naming the field and the value.
func TestConcurrencyOutOfBoundsIsRefused(t *testing.T) {
	ctx := context.Background()
	b := openURL(t, "mem://", nil)
	put(t, b, []string{"backups/a/1"}, 4)
	for _, n := range []int{backupstore.MaxConcurrency + 1, 200_000, -1} {
		_, err := backupstore.DeletePrefix(ctx, b, "backups/a/", &backupstore.DeleteOptions{Concurrency: n})
		if !errors.Is(err, backupstore.ErrInvalidConfig) || !strings.Contains(err.Error(), "DeleteOptions.Concurrency = ") {
			t.Errorf("DeletePrefix with Concurrency %d = %v; want ErrInvalidConfig naming DeleteOptions.Concurrency", n, err)
		}
		_, err = backupstore.CopyBackups(ctx, b, openURL(t, "mem://", nil), &backupstore.CopyOptions{Concurrency: n})
		if !errors.Is(err, backupstore.ErrInvalidConfig) || !strings.Contains(err.Error(), "CopyOptions.Concurrency = ") {
			t.Errorf("CopyBackups with Concurrency %d = %v; want ErrInvalidConfig naming CopyOptions.Concurrency", n, err)
		}
	}
	if len(snapshot(t, b, "")) != 1 {
		t.Error("a refused deletion deleted")
	}
}

// TestConfigurationErrorsWrapErrInvalidConfig: every option or argument the
// package cannot work with is ErrInvalidConfig, and the message names the
// field or parameter and its value.
func TestConfigurationErrorsWrapErrInvalidConfig(t *testing.T) {
	ctx := context.Background()
	mem := func() *blob.Bucket { return openURL(t, "mem://", nil) }
	for _, tc := range []struct {
		name, mention string
		call          func() error
	}{
		{"OpenBucket unknown scheme", `"ftp"`, func() error { _, err := backupstore.OpenBucket(ctx, "ftp://x", nil); return err }},
		{"OpenBucket s3 parameter", `"bogus"`, func() error {
			_, err := backupstore.OpenBucket(ctx, "s3://b?region=r&bogus=1", &backupstore.Credentials{AccessKeyID: "a", SecretAccessKey: "s"})
			return err
		}},
		{"OpenBucket s3 boolean", `use_path_style="maybe"`, func() error {
			_, err := backupstore.OpenBucket(ctx, "s3://b?region=r&use_path_style=maybe", &backupstore.Credentials{AccessKeyID: "a", SecretAccessKey: "s"})
			return err
		}},
		{"OpenBucket s3 no region", "region", func() error {
			_, err := backupstore.OpenBucket(ctx, "s3://b", &backupstore.Credentials{AccessKeyID: "a", SecretAccessKey: "s"})
			return err
		}},
		{"OpenBucket s3 credentials", "accessKeyID", func() error {
			_, err := backupstore.OpenBucket(ctx, "s3://b?region=r", &backupstore.Credentials{})
			return err
		}},
		{"DeleteOptions.AzureBatch", "DeleteOptions.AzureBatch = 7", func() error {
			_, err := backupstore.DeletePrefix(ctx, mem(), "a/", &backupstore.DeleteOptions{AzureBatch: 7})
			return err
		}},
		{"CopyOptions.MaxBackups", "CopyOptions.MaxBackups = -1", func() error {
			_, err := backupstore.CopyBackups(ctx, mem(), mem(), &backupstore.CopyOptions{MaxBackups: -1})
			return err
		}},
		{"CopyOptions.MaxBackupAge", "CopyOptions.MaxBackupAge = -1s", func() error {
			_, err := backupstore.CopyBackups(ctx, mem(), mem(), &backupstore.CopyOptions{MaxBackupAge: -time.Second})
			return err
		}},
		{"ExpirePrefix at", "at = 0001-01-01", func() error {
			_, err := backupstore.ExpirePrefix(ctx, mem(), "a/", time.Time{}, nil)
			return err
		}},
	} {
		err := tc.call()
		if !errors.Is(err, backupstore.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s: %v; want ErrInvalidConfig mentioning %s", tc.name, err, tc.mention)
		}
	}
}
