package kubelock

import (
	"errors"
	"fmt"
	"strings"
)

// maxKeyLen is the longest ConfigMap key the API server accepts.
const maxKeyLen = 253

// ConfigMap keys may contain only [-._a-zA-Z0-9], while the lock's keys are
// arbitrary bytes (the default prefix starts with 0xff 0x02). encodeKey
// keeps letters, digits, '-' and '_' and writes every other byte as '.'
// followed by two lowercase hex digits, so the key of the lock record,
// "\xff\x02/org.foundationdb.kubernetes-operator/global", is stored as
// ".ff.02.2forg.2efoundationdb.2ekubernetes-operator.2fglobal": still
// readable in `kubectl get configmap -o yaml`, and much shorter than base64
// or hex of the whole key for such mostly-text keys, which matters under
// the 253-character limit. The encoding is a bijection (every byte has one
// form), and never produces "." or "..".
func encodeKey(key []byte) string {
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

// decodeKey reverses encodeKey, and rejects anything encodeKey does not
// produce.
func decodeKey(s string) ([]byte, error) {
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

// checkKey rejects keys a ConfigMap cannot hold.
func checkKey(key []byte) error {
	if len(key) == 0 {
		return errors.New("kubelock: empty key")
	}
	if n := len(encodeKey(key)); n > maxKeyLen {
		return fmt.Errorf("kubelock: key %q is %d characters long once encoded for a ConfigMap, more than the %d allowed", key, n, maxKeyLen)
	}
	return nil
}
