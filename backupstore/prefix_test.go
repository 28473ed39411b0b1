package backupstore_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
)

func TestCheckPrefix(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix string
		rules  backupstore.PrefixRules
		ok     bool
	}{
		{"an entry directory", "backups/a/", backupstore.PrefixRules{}, true},
		{"a nested directory", "etcd/shoot--dev--x--uid/full/", backupstore.PrefixRules{}, true},
		{"empty selects the whole bucket", "", backupstore.PrefixRules{}, false},
		{"empty with AllowEmpty", "", backupstore.PrefixRules{AllowEmpty: true}, true},
		{"slash alone", "/", backupstore.PrefixRules{AllowEmpty: true, AllowPartial: true}, false},
		{"leading slash", "/backups/", backupstore.PrefixRules{}, false},
		{"dot-dot segment", "backups/../", backupstore.PrefixRules{}, false},
		{"dot-dot at the start", "../x/", backupstore.PrefixRules{}, false},
		{"dot segment", "backups/./a/", backupstore.PrefixRules{}, false},
		{"dot-dot with backslash", "backups/a\\..\\b/", backupstore.PrefixRules{}, false},
		{"backslash", "a\\b/", backupstore.PrefixRules{}, false},
		{"dots inside a name are fine", "backups/v1..2/", backupstore.PrefixRules{}, true},
		{"empty segment", "backups//", backupstore.PrefixRules{}, false},
		{"control character", "backups/\n/", backupstore.PrefixRules{}, false},
		{"invalid UTF-8", "backups/\xff/", backupstore.PrefixRules{}, false},
		{"no trailing separator", "backups/a", backupstore.PrefixRules{}, false},
		{"no trailing separator, opted in", "backups/a", backupstore.PrefixRules{AllowPartial: true}, true},
		{"opt-ins do not allow dot-dot", "a/..", backupstore.PrefixRules{AllowPartial: true, AllowEmpty: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := backupstore.CheckPrefix(tc.prefix, tc.rules)
			if tc.ok != (err == nil) {
				t.Fatalf("CheckPrefix(%q) = %v; want ok=%v", tc.prefix, err, tc.ok)
			}
			if err != nil && !errors.Is(err, backupstore.ErrUnsafePrefix) {
				t.Errorf("error %v is not ErrUnsafePrefix", err)
			}
		})
	}
}

// FuzzCheckPrefix checks the properties DeletePrefix relies on: an accepted
// prefix (default rules) is a directory with no climbing segment, so no key
// it matches can lie in a sibling directory. (share's FuzzEntryPrefix checks
// that two entries' prefixes never match each other's keys.)
func FuzzCheckPrefix(f *testing.F) {
	for _, s := range []string{"backups/a/", "backups/ab/", "", "/", "..", "a/../", "a//", "a\\..\\", "ü/", "a/\x00/"} {
		f.Add(s, "x")
	}
	f.Fuzz(func(t *testing.T, prefix, other string) {
		err := backupstore.CheckPrefix(prefix, backupstore.PrefixRules{})
		if err != nil {
			if !errors.Is(err, backupstore.ErrUnsafePrefix) {
				t.Fatalf("CheckPrefix(%q): %v is not ErrUnsafePrefix", prefix, err)
			}
			return
		}
		if prefix == "" || !strings.HasSuffix(prefix, "/") || strings.HasPrefix(prefix, "/") {
			t.Fatalf("accepted %q", prefix)
		}
		for _, seg := range strings.Split(strings.ReplaceAll(strings.TrimSuffix(prefix, "/"), "\\", "/"), "/") {
			if seg == "" || seg == "." || seg == ".." {
				t.Fatalf("accepted %q with segment %q", prefix, seg)
			}
		}
		for _, r := range prefix {
			if r < 0x20 || r == 0x7f || r == 0xfffd && !strings.Contains(prefix, "\ufffd") {
				t.Fatalf("accepted %q with control or invalid character", prefix)
			}
		}
		// A sibling that shares the leading characters is never matched.
		sibling := strings.TrimSuffix(prefix, "/") + other + "/"
		if other != "" && !strings.HasPrefix(other, "/") && strings.HasPrefix(sibling+"key", prefix) {
			t.Fatalf("prefix %q matches sibling %q", prefix, sibling)
		}
	})
}
