package share_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/share"
)

func ExampleEntryPrefix() {
	p, _ := share.EntryPrefix("etcd/", "shoot--dev--example--19a9538b-5058-11e9-b5a6-5e696cab3bc8")
	fmt.Println(p)
	_, err := share.EntryPrefix("etcd/", "")
	fmt.Println(errors.Is(err, backupstore.ErrUnsafePrefix))
	// Output:
	// etcd/shoot--dev--example--19a9538b-5058-11e9-b5a6-5e696cab3bc8/
	// true
}

func ExampleQuota() {
	ctx := context.Background()
	b, _ := backupstore.OpenBucket(ctx, "mem://", nil)
	defer b.Close()
	for _, e := range []string{"shoot--a--1", "shoot--b--2"} {
		b.WriteAll(ctx, "etcd/"+e+"/Full-1", []byte("x"), nil)
	}
	q := share.Quota{Root: "etcd/", Limit: 2}
	n, err := q.Admit(ctx, b, "shoot--a--1") // already there
	fmt.Println(n, err)
	_, err = q.Admit(ctx, b, "shoot--c--3")
	fmt.Println(errors.Is(err, share.ErrBucketFull))
	// Output:
	// 2 <nil>
	// true
}

// Entries refuses a root that reaches siblings: root "etcd" would list the
// entries of "etcd-old/" as well.
func TestEntriesRefusesARootThatReachesSiblings(t *testing.T) {
	ctx := context.Background()
	b, err := backupstore.OpenBucket(ctx, "mem://", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, k := range []string{"etcd/a--1/x", "etcd-old/b--2/x"} {
		if err := b.WriteAll(ctx, k, []byte("data"), nil); err != nil {
			t.Fatal(err)
		}
	}
	got, err := share.Entries(ctx, b, "etcd")
	if !errors.Is(err, backupstore.ErrUnsafePrefix) {
		t.Errorf("Entries(root \"etcd\") = %q, %v; want ErrUnsafePrefix", got, err)
	}
	got, err = share.Entries(ctx, b, "etcd/")
	if err != nil || !slices.Equal(got, []string{"a--1"}) {
		t.Errorf("Entries(root \"etcd/\") = %q, %v; want [a--1]", got, err)
	}
}

// FuzzEntryPrefix: the prefixes of two different entries never match each
// other's keys ("a" and "ab" included).
func FuzzEntryPrefix(f *testing.F) {
	for _, s := range [][2]string{{"a", "ab"}, {"db", "db-old"}, {"x", "x/"}, {"", "a"}, {"..", "a"}, {"ü", "u"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, one, other string) {
		a, errA := share.EntryPrefix("root/", one)
		b, errB := share.EntryPrefix("root/", other)
		if errA == nil && errB == nil && a != b && (strings.HasPrefix(a, b) || strings.HasPrefix(b, a)) {
			t.Fatalf("entry prefixes %q and %q overlap", a, b)
		}
		for _, err := range []error{errA, errB} {
			if err != nil && !errors.Is(err, backupstore.ErrUnsafePrefix) {
				t.Fatalf("EntryPrefix error %v is not ErrUnsafePrefix", err)
			}
		}
	})
}
