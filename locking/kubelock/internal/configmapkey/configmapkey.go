// Package configmapkey escapes arbitrary byte strings into ConfigMap keys
// and back, for kubelock. It has no dependencies, so that it can be fuzzed
// quickly.
package configmapkey

import (
	"errors"
	"fmt"
	"strings"
)

// MaxLen is the longest ConfigMap key the API server accepts.
const MaxLen = 253

// Encode escapes key for a ConfigMap. ConfigMap keys may contain only
// [-._a-zA-Z0-9], while the lock's keys are arbitrary bytes (the default
// prefix starts with 0xff 0x02). Encode keeps letters, digits, '-' and '_'
// and writes every other byte as '.' followed by two lowercase hex digits,
// so the key of the lock record,
// "\xff\x02/org.foundationdb.kubernetes-operator/global", is stored as
// ".ff.02.2forg.2efoundationdb.2ekubernetes-operator.2fglobal": still
// readable in `kubectl get configmap -o yaml`, and much shorter than base64
// or hex of the whole key for such mostly-text keys, which matters under
// the 253-character limit. The encoding is a bijection (every byte has one
// form), and never produces "." or "..".
func Encode(key []byte) string {
	var b strings.Builder
	b.Grow(len(key) + len(key)/4)
	for _, c := range key {
		if plain(c) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, ".%02x", c)
	}
	return b.String()
}

func plain(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// Decode reverses Encode, and rejects anything Encode does not produce.
func Decode(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("empty key")
	}
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plain(c) {
			out = append(out, c)
			continue
		}
		if c != '.' || i+2 >= len(s) {
			return nil, fmt.Errorf("key %q: byte %d is neither a plain character nor a complete escape", s, i)
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("key %q: escape at byte %d is not two lowercase hex digits", s, i)
		}
		d := hi<<4 | lo
		if plain(d) {
			return nil, fmt.Errorf("key %q: escape at byte %d encodes a plain character", s, i)
		}
		out = append(out, d)
		i += 2
	}
	return out, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// Check rejects keys a ConfigMap cannot hold once encoded.
func Check(key []byte) error {
	if len(key) == 0 {
		return errors.New("empty key")
	}
	if n := len(Encode(key)); n > MaxLen {
		return fmt.Errorf("key %q is %d characters long once encoded for a ConfigMap, more than the %d allowed", key, n, MaxLen)
	}
	return nil
}
