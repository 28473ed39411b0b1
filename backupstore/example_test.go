package backupstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
)

func ExampleDeletePrefix() {
	ctx := context.Background()
	b, _ := backupstore.OpenBucket(ctx, "mem://", nil)
	defer b.Close()
	for _, k := range []string{"backups/a/full-1", "backups/a/delta-2", "backups/ab/full-1"} {
		b.WriteAll(ctx, k, []byte("snapshot"), nil)
	}

	// First see what would go.
	dry, _ := backupstore.DeletePrefix(ctx, b, "backups/a/", &backupstore.DeleteOptions{DryRun: true})
	fmt.Println("would delete:", dry.Keys, dry.Bytes, "bytes")

	res, err := backupstore.DeletePrefix(ctx, b, "backups/a/", nil)
	fmt.Println("deleted:", res.Deleted, err)
	ok, _ := b.Exists(ctx, "backups/ab/full-1")
	fmt.Println("sibling kept:", ok)

	// A prefix without its trailing "/" would also match "backups/ab/".
	_, err = backupstore.DeletePrefix(ctx, b, "backups/a", nil)
	fmt.Println(errors.Is(err, backupstore.ErrUnsafePrefix))
	// Output:
	// would delete: [backups/a/delta-2 backups/a/full-1] 16 bytes
	// deleted: 2 <nil>
	// sibling kept: true
	// true
}

func ExampleCopyBackups() {
	ctx := context.Background()
	src, _ := backupstore.OpenBucket(ctx, "mem://", nil)
	dst, _ := backupstore.OpenBucket(ctx, "mem://", nil)
	defer src.Close()
	defer dst.Close()
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	// Four daily snapshots; the key carries the day it was taken.
	for day := 1; day <= 4; day++ {
		src.WriteAll(ctx, fmt.Sprintf("etcd/Full-%02d", 22-day), []byte("data"), nil)
	}
	taken := func(key string, _ time.Time) (string, time.Time) {
		var d int
		fmt.Sscanf(key, "etcd/Full-%d", &d)
		return key, time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC)
	}
	res, err := backupstore.CopyBackups(ctx, src, dst, &backupstore.CopyOptions{
		SourcePrefix: "etcd/", TargetPrefix: "migrated/",
		MaxBackupAge: 3 * 24 * time.Hour, // younger than 3 days: the 21st and 20th
		MaxBackups:   5,
		Backup:       taken,
		Clock:        clocktesting.NewFakeClock(now),
	})
	fmt.Println(res.Copied, "copied,", res.Excluded, "excluded,", err)
	for _, e := range res.Manifest.Entries {
		fmt.Println(e.Key, e.Status)
	}
	// Output:
	// 2 copied, 2 excluded, <nil>
	// etcd/Full-20 Copied
	// etcd/Full-21 Copied
}
