package configmapkey

import (
	"bytes"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestEncoding(t *testing.T) {
	for _, c := range []struct {
		name, key, encoded string
	}{
		{"lock record under the default prefix", "\xff\x02/org.foundationdb.kubernetes-operator/global", ".ff.02.2forg.2efoundationdb.2ekubernetes-operator.2fglobal"},
		{"plain characters stay", "Az09-_", "Az09-_"},
		{"a dot is escaped, so no key is . or ..", "..", ".2e.2e"},
		{"NUL and 0xff", "\x00\xff", ".00.ff"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Encode([]byte(c.key)); got != c.encoded {
				t.Fatalf("Encode(%q) = %q, want %q", c.key, got, c.encoded)
			}
			got, err := Decode(c.encoded)
			if err != nil || string(got) != c.key {
				t.Fatalf("Decode(%q) = %q, %v; want %q", c.encoded, got, err, c.key)
			}
		})
	}
}

func TestDecodeRejectsWhatEncodeKeyDoesNotProduce(t *testing.T) {
	for _, s := range []string{"", ".", "..", ".f", ".FF", ".zz", ".61" /* 'a' */, "a b", "a/b"} {
		if k, err := Decode(s); err == nil {
			t.Errorf("Decode(%q) = %q, want an error", s, k)
		}
	}
}

func TestCheckLength(t *testing.T) {
	if err := Check(bytes.Repeat([]byte("a"), MaxLen)); err != nil {
		t.Errorf("a %d-character plain key was rejected: %v", MaxLen, err)
	}
	if err := Check(bytes.Repeat([]byte("/"), MaxLen/3+1)); err == nil {
		t.Errorf("a key longer than %d once encoded was accepted", MaxLen)
	}
	if err := Check(nil); err == nil {
		t.Errorf("the empty key was accepted")
	}
}

func FuzzEncoding(f *testing.F) {
	f.Add([]byte("\xff\x02/org.foundationdb.kubernetes-operator/global"))
	f.Add([]byte(".2e"))
	f.Fuzz(func(t *testing.T, key []byte) {
		enc := Encode(key)
		if len(key) > 0 && len(enc) <= MaxLen {
			if errs := validation.IsConfigMapKey(enc); len(errs) > 0 {
				t.Fatalf("Encode(%q) = %q, not a valid ConfigMap key: %v", key, enc, errs)
			}
		}
		if len(key) > 0 {
			dec, err := Decode(enc)
			if err != nil || !bytes.Equal(dec, key) {
				t.Fatalf("Decode(Encode(%q)) = %q, %v", key, dec, err)
			}
		}
		// Decoding arbitrary input never panics, and what decodes encodes
		// back to the same string.
		if dec, err := Decode(string(key)); err == nil && Encode(dec) != string(key) {
			t.Fatalf("Decode(%q) = %q, which encodes to %q", key, dec, Encode(dec))
		}
	})
}
