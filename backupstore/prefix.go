package backupstore

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/groundskeeper-io/groundskeeper/internal/errclass"
)

// Separator is the key separator that prefixes end in. Object stores have no
// directories; by convention (and in gocloud's fileblob) "/" separates them.
const Separator = "/"

// ErrUnsafePrefix is returned, wrapped in a *PrefixError, when a prefix given
// to DeletePrefix (or built by share.EntryPrefix) breaks a safety rule.
var ErrUnsafePrefix = errclass.Terminal("backupstore: unsafe prefix")

// PrefixError names a refused prefix and the rule it breaks. It unwraps to
// ErrUnsafePrefix.
type PrefixError struct {
	Prefix string
	Reason string
}

func (e *PrefixError) Error() string {
	return fmt.Sprintf("backupstore: unsafe prefix %q: %s", e.Prefix, e.Reason)
}

// Terminal reports true: retrying cannot cure the error (crt.Terminal).
func (*PrefixError) Terminal() bool { return true }

// Unwrap returns ErrUnsafePrefix.
func (e *PrefixError) Unwrap() error { return ErrUnsafePrefix }

// PrefixRules are the opt-ins to prefixes that CheckPrefix refuses by default.
// The zero value is the strictest.
type PrefixRules struct {
	// AllowEmpty accepts the empty prefix, which names every object in the
	// bucket. Meant for buckets that belong to one owner alone.
	AllowEmpty bool
	// AllowPartial accepts a prefix that does not end in Separator. Such a
	// prefix also matches siblings that share its leading characters:
	// "backups/a" matches "backups/ab/x" as well as "backups/a/x".
	AllowPartial bool
}

// CheckPrefix reports whether prefix may be used to select objects for
// deletion. It refuses, with a *PrefixError:
//
//   - the empty prefix, unless rules.AllowEmpty;
//   - a prefix that starts with Separator (so "/" itself): keys written by
//     backup tools never do, and a leading "/" usually comes from joining an
//     empty root with a path;
//   - an empty path segment ("a//b/"), usually an empty variable;
//   - a "." or ".." path segment, which file-system backed stores resolve;
//   - invalid UTF-8 and control characters (U+0000–U+001F, U+007F), which
//     some drivers escape, so the key sent would differ from the one checked;
//   - a backslash, a separator for fileblob on Windows;
//   - a prefix that does not end in Separator, unless rules.AllowPartial.
func CheckPrefix(prefix string, rules PrefixRules) error {
	refuse := func(reason string) error { return &PrefixError{Prefix: prefix, Reason: reason} }
	if prefix == "" {
		if rules.AllowEmpty {
			return nil
		}
		return refuse("empty prefix selects the whole bucket")
	}
	if !utf8.ValidString(prefix) {
		return refuse("invalid UTF-8")
	}
	for _, r := range prefix {
		if r < 0x20 || r == 0x7f {
			return refuse("control character")
		}
	}
	if strings.Contains(prefix, "\\") {
		// fileblob on Windows splits keys at "\" too: "a\..\" climbs and
		// "\x" is absolute. Backup keys have no use for it.
		return refuse("backslash")
	}
	if strings.HasPrefix(prefix, Separator) {
		return refuse("starts with " + Separator)
	}
	segs := strings.Split(prefix, Separator)
	for i, seg := range segs {
		if seg == "" && i != len(segs)-1 {
			return refuse("empty path segment")
		}
		if seg == "." || seg == ".." {
			return refuse(fmt.Sprintf("path segment %q", seg))
		}
	}
	if !strings.HasSuffix(prefix, Separator) && !rules.AllowPartial {
		return refuse("does not end in " + Separator + " and would also match siblings sharing its leading characters")
	}
	return nil
}

// underPrefix is the check made on every key right before it is deleted.
func underPrefix(key, prefix string) bool {
	return key != "" && strings.HasPrefix(key, prefix)
}
