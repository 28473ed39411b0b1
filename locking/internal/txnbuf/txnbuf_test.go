package txnbuf

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/groundskeeper-io/groundskeeper/locking"
)

func TestLookupSeesTheLastWriteToAKey(t *testing.T) {
	var b Buffer
	b.Set([]byte("p/a"), []byte("1"))
	if err := b.ClearPrefix([]byte("p/")); err != nil {
		t.Fatal(err)
	}
	b.Set([]byte("p/b"), []byte("2"))
	for _, c := range []struct {
		key              string
		value            string
		present, decided bool
	}{
		{"p/a", "", false, true}, // set, then cleared with its prefix
		{"p/b", "2", true, true}, // set after the clear
		{"p/c", "", false, true}, // under the cleared prefix
		{"q", "", false, false},  // untouched: read the store
	} {
		v, ok, decided := b.Lookup([]byte(c.key))
		if string(v) != c.value || ok != c.present || decided != c.decided {
			t.Errorf("Lookup(%q) = %q, %v, %v; want %q, %v, %v", c.key, v, ok, decided, c.value, c.present, c.decided)
		}
	}
}

func TestMergeAppliesWritesInOrderAndSorts(t *testing.T) {
	var b Buffer
	b.Set([]byte("p/z"), []byte("new"))
	b.Clear([]byte("p/b"))
	b.Set([]byte("other"), []byte("x"))
	stored := []locking.KeyValue{
		{Key: []byte("p/b"), Value: []byte("old")},
		{Key: []byte("p/a"), Value: []byte("old")},
	}
	got := b.Merge([]byte("p/"), stored)
	want := []locking.KeyValue{
		{Key: []byte("p/a"), Value: []byte("old")},
		{Key: []byte("p/z"), Value: []byte("new")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("Merge (-want +got):\n%s", diff)
	}
}

func TestClearPrefixRejectsEmptyPrefix(t *testing.T) {
	var b Buffer
	if err := b.ClearPrefix(nil); err == nil {
		t.Fatal("ClearPrefix(nil) succeeded")
	}
	if !b.Empty() {
		t.Fatal("a rejected ClearPrefix was buffered")
	}
}
