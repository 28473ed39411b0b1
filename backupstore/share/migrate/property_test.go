package migrate_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/internal/propertytest"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share/migrate"
)

// A migration deletes, of its source, only what its target holds: whatever
// its source (the entry's own legacy bucket, a prefix of it, or by mistake
// the shared bucket itself under another spelling of its URL, where other
// tenants' entries are) and whenever the writer writes (before the pause,
// or after the switch, when a writer the switch did not reach goes on
// writing to the legacy bucket). Every object written by the entry's
// writer is, after every step, in the source or copied into the target,
// and every other tenant's object is where it was.
func TestPropertyMigrationDeletesOnlyWhatItCopied(t *testing.T) {
	t.Parallel()
	propertytest.Seeds(t, func(t *testing.T, seed uint64) {
		ctx := context.Background()
		rnd := rand.New(rand.NewPCG(seed, 11))
		dir := t.TempDir()
		url := func(name string) string { return "file://" + filepath.ToSlash(filepath.Join(dir, name)) }
		open := func(raw string) *blob.Bucket {
			b, err := backupstore.OpenBucket(ctx, raw+"?create_dir=true", nil)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		history := []string{fmt.Sprintf("seed %d", seed)}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf(format+"; steps:\n%s", append(args, strings.Join(history, "\n"))...)
		}
		// Other tenants' data in the shared bucket.
		shared := open(url("shared"))
		var foreign []string
		for i := range 3 {
			k := fmt.Sprintf("team-b.db/backup-%d", i)
			if err := shared.WriteAll(ctx, k, []byte("team-b"), nil); err != nil {
				t.Fatal(err)
			}
			foreign = append(foreign, k)
		}
		shared.Close()
		// The source: the entry's legacy bucket, whole or a prefix of it,
		// or the shared bucket spelled another way.
		sourceURL, sourcePrefix := url("legacy"), []string{"", "db/"}[rnd.IntN(2)]
		if rnd.IntN(3) == 0 {
			sourceURL, sourcePrefix = "file://"+filepath.ToSlash(dir)+"/./shared/", ""
		}
		history = append(history, fmt.Sprintf("source %s prefix %q", sourceURL, sourcePrefix))
		const target = "team-a.db/"
		var mine []string // keys relative to the source prefix
		n := 0
		write := func(why string) {
			b := open(sourceURL)
			defer b.Close()
			n++
			k := fmt.Sprintf("backup-%d", n)
			if err := b.WriteAll(ctx, sourcePrefix+k, []byte("team-a"), nil); err != nil {
				t.Fatal(err)
			}
			mine = append(mine, k)
			history = append(history, fmt.Sprintf("writer (%s): %s%s", why, sourcePrefix, k))
		}
		for range 1 + rnd.IntN(4) {
			write("before")
		}
		clk := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
		m := migrate.Migration{
			Buckets: func(context.Context) (*blob.Bucket, *blob.Bucket, func(), error) {
				l, s := open(sourceURL), open(url("shared"))
				return l, s, func() { l.Close(); s.Close() }, nil
			},
			SourcePrefix: sourcePrefix, TargetPrefix: target,
			Hooks: migrate.Hooks{
				Pause:  func(context.Context) error { return nil },
				Switch: func(context.Context) error { return nil },
				Resume: func(context.Context) error { return nil },
			},
			GracePeriod: time.Minute, Clock: clk,
		}
		var st migrate.Status
		for range 25 {
			step := st.Step
			done, _, err := m.Next(ctx, &st)
			history = append(history, fmt.Sprintf("step %s: done %v, %v", step, done, err))
			clk.Step(time.Minute)
			// A writer the switch did not reach goes on writing.
			if st.Step != migrate.StepCopyRemaining && rnd.IntN(3) == 0 {
				write("meanwhile")
			}
			src, sh := open(sourceURL), open(url("shared"))
			for _, k := range foreign {
				if ok, _ := sh.Exists(ctx, k); !ok {
					fail("another tenant's %s was deleted from the shared bucket", k)
				}
			}
			for _, k := range mine {
				inSource, _ := src.Exists(ctx, sourcePrefix+k)
				inTarget, _ := sh.Exists(ctx, target+k)
				if !inSource && !inTarget {
					fail("the writer's %s is in neither the source nor the target", k)
				}
			}
			src.Close()
			sh.Close()
			if done {
				break
			}
		}
	})
}
