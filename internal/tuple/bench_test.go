package tuple

import "testing"

// The lock value is the tuple this module packs and unpacks most.
var lockValue = Tuple{"dc1", int64(1700000000), int64(1700000600)}

func BenchmarkPackLockValue(b *testing.B) {
	buf := make([]byte, 0, 64)
	for b.Loop() {
		var err error
		if buf, err = Append(buf[:0], lockValue); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnpackLockValue(b *testing.B) {
	enc, err := lockValue.Pack()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Unpack(enc); err != nil {
			b.Fatal(err)
		}
	}
}
