package kubelock

import (
	"bytes"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestKeyEncoding(t *testing.T) {
	for _, c := range []struct {
		name, key, encoded string
	}{
		{"lock record under the default prefix", "\xff\x02/org.foundationdb.kubernetes-operator/global", ".ff.02.2forg.2efoundationdb.2ekubernetes-operator.2fglobal"},
		{"plain characters stay", "Az09-_", "Az09-_"},
		{"a dot is escaped, so no key is . or ..", "..", ".2e.2e"},
		{"NUL and 0xff", "\x00\xff", ".00.ff"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := encodeKey([]byte(c.key)); got != c.encoded {
				t.Fatalf("encodeKey(%q) = %q, want %q", c.key, got, c.encoded)
			}
			got, err := decodeKey(c.encoded)
			if err != nil || string(got) != c.key {
				t.Fatalf("decodeKey(%q) = %q, %v; want %q", c.encoded, got, err, c.key)
			}
		})
	}
}

func TestDecodeKeyRejectsWhatEncodeKeyDoesNotProduce(t *testing.T) {
	for _, s := range []string{"", ".", "..", ".f", ".FF", ".zz", ".61" /* 'a' */, "a b", "a/b"} {
		if k, err := decodeKey(s); err == nil {
			t.Errorf("decodeKey(%q) = %q, want an error", s, k)
		}
	}
}

func TestCheckKeyLength(t *testing.T) {
	if err := checkKey(bytes.Repeat([]byte("a"), maxKeyLen)); err != nil {
		t.Errorf("a %d-character plain key was rejected: %v", maxKeyLen, err)
	}
	if err := checkKey(bytes.Repeat([]byte("/"), maxKeyLen/3+1)); err == nil {
		t.Errorf("a key longer than %d once encoded was accepted", maxKeyLen)
	}
	if err := checkKey(nil); err == nil {
		t.Errorf("the empty key was accepted")
	}
}

func FuzzKeyEncoding(f *testing.F) {
	f.Add([]byte("\xff\x02/org.foundationdb.kubernetes-operator/global"))
	f.Add([]byte(".2e"))
	f.Fuzz(func(t *testing.T, key []byte) {
		enc := encodeKey(key)
		if len(key) > 0 && len(enc) <= maxKeyLen {
			if errs := validation.IsConfigMapKey(enc); len(errs) > 0 {
				t.Fatalf("encodeKey(%q) = %q, not a valid ConfigMap key: %v", key, enc, errs)
			}
		}
		if len(key) > 0 {
			dec, err := decodeKey(enc)
			if err != nil || !bytes.Equal(dec, key) {
				t.Fatalf("decodeKey(encodeKey(%q)) = %q, %v", key, dec, err)
			}
		}
		// Decoding arbitrary input never panics, and what decodes encodes
		// back to the same string.
		if dec, err := decodeKey(string(key)); err == nil && encodeKey(dec) != string(key) {
			t.Fatalf("decodeKey(%q) = %q, which encodes to %q", key, dec, encodeKey(dec))
		}
	})
}
