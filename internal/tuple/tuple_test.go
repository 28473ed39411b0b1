package tuple

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"math/big"
	"strings"
	"testing"
)

const ff = 0xff

func shl1(n uint) *big.Int { return new(big.Int).Lsh(big.NewInt(1), n) }

func add(a *big.Int, d int64) *big.Int { return new(big.Int).Add(a, big.NewInt(d)) }

func neg(a *big.Int) *big.Int { return new(big.Int).Neg(a) }

type vector struct {
	name  string
	tuple Tuple
	want  []byte
}

// Byte-exact vectors. Sources:
//   - [spec]: design/tuple.md in apple/foundationdb, the "Test case" lines.
//   - [java]: bindings/java/src/test/com/apple/foundationdb/test/TupleTest.java
//     in apple/foundationdb, serializedForms().
//   - [lock]: the FoundationDB operator's lock value, tuple{lockID, start, end}
//     as written by fdbclient/lock_client.go (updateLock) in
//     FoundationDB/fdb-kubernetes-operator; bytes derived from [spec] by hand
//     (1700000000 = 0x6553f100, 1700000600 = 0x6553f358).
var vectors = []vector{
	// [spec]
	{"spec bytes with nul", Tuple{[]byte("foo\x00bar")}, []byte("\x01foo\x00\xffbar\x00")},
	{"spec unicode string", Tuple{"F\u00d4O\u0000bar"}, []byte("\x02F\xc3\x94O\x00\xffbar\x00")},
	{"spec nested with null and empty tuple", Tuple{Tuple{[]byte("foo\x00bar"), nil, Tuple{}}},
		[]byte("\x05\x01foo\x00\xffbar\x00\x00\xff\x05\x00\x00")},
	{"spec negative int", Tuple{-5551212}, []byte("\x11\xabK\x93")},
	{"spec negative float", Tuple{float32(-42)}, []byte("\x20\x3d\xd7\xff\xff")},
	{"spec minus one", Tuple{-1}, []byte{0x13, 0xfe}},
	{"spec empty nested tuple", Tuple{Tuple{}}, []byte{0x05, 0x00}},
	{"spec nested tuple holding null", Tuple{Tuple{nil}}, []byte{0x05, 0x00, 0xff, 0x00}},

	// [java]
	{"java empty tuple", Tuple{}, []byte{}},
	{"java zero", Tuple{0}, []byte{0x14}},
	{"java big zero", Tuple{big.NewInt(0)}, []byte{0x14}},
	{"java one", Tuple{int64(1)}, []byte{0x15, 0x01}},
	{"java big one", Tuple{big.NewInt(1)}, []byte{0x15, 0x01}},
	{"java minus one", Tuple{int64(-1)}, []byte{0x13, ff - 1}},
	{"java big minus one", Tuple{big.NewInt(-1)}, []byte{0x13, ff - 1}},
	{"java 255", Tuple{255}, []byte{0x15, ff}},
	{"java -255", Tuple{-255}, []byte{0x13, 0x00}},
	{"java 256", Tuple{256}, []byte{0x16, 0x01, 0x00}},
	{"java -256", Tuple{-256}, []byte{0x12, ff - 1, ff}},
	{"java 65536", Tuple{65536}, []byte{0x17, 0x01, 0x00, 0x00}},
	{"java -65536", Tuple{-65536}, []byte{0x11, ff - 1, ff, ff}},
	{"java MaxInt64", Tuple{int64(math.MaxInt64)}, []byte{0x1c, 0x7f, ff, ff, ff, ff, ff, ff, ff}},
	{"java MaxInt64+1", Tuple{add(big.NewInt(math.MaxInt64), 1)}, []byte{0x1c, 0x80, 0, 0, 0, 0, 0, 0, 0}},
	{"java MaxInt64+1 as uint64", Tuple{uint64(math.MaxInt64 + 1)}, []byte{0x1c, 0x80, 0, 0, 0, 0, 0, 0, 0}},
	{"java 2^64-1", Tuple{add(shl1(64), -1)}, []byte{0x1c, ff, ff, ff, ff, ff, ff, ff, ff}},
	{"java 2^64", Tuple{shl1(64)}, []byte{0x1d, 0x09, 0x01, 0, 0, 0, 0, 0, 0, 0, 0}},
	{"java -(2^32-1)", Tuple{-(1<<32 - 1)}, []byte{0x10, 0, 0, 0, 0}},
	{"java MinInt64+2", Tuple{int64(math.MinInt64 + 2)}, []byte{0x0c, 0x80, 0, 0, 0, 0, 0, 0, 0x01}},
	{"java MinInt64+1", Tuple{int64(math.MinInt64 + 1)}, []byte{0x0c, 0x80, 0, 0, 0, 0, 0, 0, 0}},
	{"java MinInt64", Tuple{int64(math.MinInt64)}, []byte{0x0c, 0x7f, ff, ff, ff, ff, ff, ff, ff}},
	{"java big MinInt64", Tuple{big.NewInt(math.MinInt64)}, []byte{0x0c, 0x7f, ff, ff, ff, ff, ff, ff, ff}},
	{"java MinInt64-1", Tuple{add(big.NewInt(math.MinInt64), -1)}, []byte{0x0c, 0x7f, ff, ff, ff, ff, ff, ff, ff - 1}},
	{"java -(2^64-1)", Tuple{neg(add(shl1(64), -1))}, []byte{0x0c, 0, 0, 0, 0, 0, 0, 0, 0}},
	{"java 3.14f", Tuple{float32(3.14)}, []byte{0x20, 0xc0, 0x48, 0xf5, 0xc3}},
	{"java -3.14f", Tuple{float32(-3.14)}, []byte{0x20, 0x3f, 0xb7, 0x0a, 0x3c}},
	{"java 3.14", Tuple{3.14}, []byte{0x21, 0xc0, 0x09, 0x1e, 0xb8, 0x51, 0xeb, 0x85, 0x1f}},
	{"java -3.14", Tuple{-3.14}, []byte{0x21, 0x3f, 0xf6, 0xe1, 0x47, 0xae, 0x14, 0x7a, 0xe0}},
	{"java 0.0f", Tuple{float32(0)}, []byte{0x20, 0x80, 0, 0, 0}},
	{"java -0.0f", Tuple{float32(math.Copysign(0, -1))}, []byte{0x20, 0x7f, ff, ff, ff}},
	{"java 0.0", Tuple{0.0}, []byte{0x21, 0x80, 0, 0, 0, 0, 0, 0, 0}},
	{"java -0.0", Tuple{math.Copysign(0, -1)}, []byte{0x21, 0x7f, ff, ff, ff, ff, ff, ff, ff}},
	{"java +Inf float", Tuple{float32(math.Inf(1))}, []byte{0x20, ff, 0x80, 0, 0}},
	{"java -Inf float", Tuple{float32(math.Inf(-1))}, []byte{0x20, 0x00, 0x7f, ff, ff}},
	{"java +Inf double", Tuple{math.Inf(1)}, []byte{0x21, ff, 0xf0, 0, 0, 0, 0, 0, 0}},
	{"java -Inf double", Tuple{math.Inf(-1)}, []byte{0x21, 0x00, 0x0f, ff, ff, ff, ff, ff, ff}},
	{"java float bits MaxInt32", Tuple{math.Float32frombits(math.MaxInt32)}, []byte{0x20, ff, ff, ff, ff}},
	{"java double bits MaxInt64", Tuple{math.Float64frombits(math.MaxInt64)}, []byte{0x21, ff, ff, ff, ff, ff, ff, ff, ff}},
	{"java float bits all ones", Tuple{math.Float32frombits(^uint32(0))}, []byte{0x20, 0, 0, 0, 0}},
	{"java double bits all ones", Tuple{math.Float64frombits(^uint64(0))}, []byte{0x21, 0, 0, 0, 0, 0, 0, 0, 0}},
	{"java empty bytes", Tuple{[]byte{}}, []byte{0x01, 0x00}},
	{"java bytes 1 2 3", Tuple{[]byte{1, 2, 3}}, []byte{0x01, 1, 2, 3, 0x00}},
	{"java bytes with nuls", Tuple{[]byte{0, 0, 0, 4}}, []byte{0x01, 0, ff, 0, ff, 0, ff, 0x04, 0x00}},
	{"java empty string", Tuple{""}, []byte{0x02, 0x00}},
	{"java hello", Tuple{"hello"}, []byte("\x02hello\x00")},
	{"java chinese", Tuple{"\u4e2d\u6587"}, []byte{0x02, 0xe4, 0xb8, 0xad, 0xe6, 0x96, 0x87, 0x00}},
	{"java greek", Tuple{"\u03bc\u03ac\u03b8\u03b7\u03bc\u03b1"},
		[]byte{0x02, 0xce, 0xbc, 0xce, 0xac, 0xce, 0xb8, 0xce, 0xb7, 0xce, 0xbc, 0xce, 0xb1, 0x00}},
	{"java fire emoji", Tuple{"\U0001f525"}, []byte{0x02, 0xf0, 0x9f, 0x94, 0xa5, 0x00}},
	{"java max code point", Tuple{"\U0010ffff"}, []byte{0x02, 0xf4, 0x8f, 0xbf, 0xbf, 0x00}},
	{"java nested null", Tuple{Tuple{nil}}, []byte{0x05, 0x00, ff, 0x00}},
	{"java nested null and hello", Tuple{Tuple{nil, "hello"}}, []byte("\x05\x00\xff\x02hello\x00\x00")},
	{"java nested null and hell nul", Tuple{Tuple{nil, "hell\x00"}}, []byte("\x05\x00\xff\x02hell\x00\xff\x00\x00")},
	{"java nested then string", Tuple{Tuple{nil}, "hello"}, []byte("\x05\x00\xff\x00\x02hello\x00")},
	{"java nested, string, bytes", Tuple{Tuple{nil}, "hello", []byte{0x01, 0x00}, []byte{}},
		[]byte("\x05\x00\xff\x00\x02hello\x00\x01\x01\x00\xff\x00\x01\x00")},
	{"java uuid", Tuple{UUID{ff, ff, ff, ff, 0xba, 0x5e, 0xba, 0x11, 0, 0, 0, 0, 0x5c, 0xa1, 0xab, 0x1e}},
		[]byte{0x30, ff, ff, ff, ff, 0xba, 0x5e, 0xba, 0x11, 0, 0, 0, 0, 0x5c, 0xa1, 0xab, 0x1e}},
	{"java false", Tuple{false}, []byte{0x26}},
	{"java true", Tuple{true}, []byte{0x27}},
	{"java short", Tuple{int16(0x3019)}, []byte{0x16, 0x30, 0x19}},
	{"java byte", Tuple{int8(3)}, []byte{0x15, 0x03}},
	{"java versionstamp", Tuple{Versionstamp{TransactionVersion: [10]byte{0xaa, 0xbb, 0xcc, 0xdd, 0xee, ff, 0, 1, 2, 3}}},
		[]byte{0x33, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, ff, 0, 1, 2, 3, 0, 0}},
	{"java versionstamp user 657", Tuple{Versionstamp{TransactionVersion: [10]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, UserVersion: 657}},
		[]byte{0x33, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0x02, 0x91}},

	// [lock]
	{"lock value", Tuple{"dc1", int64(1700000000), int64(1700000600)},
		[]byte("\x02dc1\x00\x18\x65\x53\xf1\x00\x18\x65\x53\xf3\x58")},

	// Big integers beyond eight bytes, derived from the [spec] text for 0x0b
	// and 0x1d and checked against [java]'s 2^64 vector.
	{"2^64-th negative", Tuple{neg(shl1(64))}, []byte{0x0b, 0x09 ^ ff, 0xfe, ff, ff, ff, ff, ff, ff, ff, ff}},
	{"2^2040-1", Tuple{add(shl1(2040), -1)}, append([]byte{0x1d, 0xff}, bytes.Repeat([]byte{ff}, 255)...)},
	{"-(2^2040-1)", Tuple{neg(add(shl1(2040), -1))}, append([]byte{0x0b, 0x00}, bytes.Repeat([]byte{0}, 255)...)},
}

func TestPackVectors(t *testing.T) {
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			got, err := v.tuple.Pack()
			if err != nil {
				t.Fatalf("Pack(%v): %v", v.tuple, err)
			}
			if !bytes.Equal(got, v.want) {
				t.Errorf("Pack(%v)\n got %s\nwant %s", v.tuple, hex.EncodeToString(got), hex.EncodeToString(v.want))
			}
		})
	}
}

func TestUnpackVectors(t *testing.T) {
	for _, v := range vectors {
		t.Run(v.name, func(t *testing.T) {
			got, err := Unpack(v.want)
			if err != nil {
				t.Fatalf("Unpack(%x): %v", v.want, err)
			}
			if !equalTuples(got, normalize(v.tuple)) {
				t.Errorf("Unpack(%x) = %#v, want %#v", v.want, got, v.tuple)
			}
		})
	}
}

// TestUnpackNormalisesTypes pins the decoded Go types, which callers such as
// the lock value decoder rely on (the FoundationDB operator asserts int64).
func TestUnpackNormalisesTypes(t *testing.T) {
	cases := []struct {
		name string
		in   any
		want any
	}{
		{"int becomes int64", 7, int64(7)},
		{"uint32 becomes int64", uint32(7), int64(7)},
		{"uint64 above MaxInt64 stays uint64", uint64(math.MaxUint64), uint64(math.MaxUint64)},
		{"small big.Int becomes int64", big.NewInt(-9), int64(-9)},
		{"big.Int MinInt64 becomes int64", big.NewInt(math.MinInt64), int64(math.MinInt64)},
		{"MinInt64-1 stays big", add(big.NewInt(math.MinInt64), -1), add(big.NewInt(math.MinInt64), -1)},
		{"2^64 stays big", shl1(64), shl1(64)},
		{"big.Int value", *big.NewInt(5), int64(5)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := Tuple{c.in}.Pack()
			if err != nil {
				t.Fatal(err)
			}
			got, err := Unpack(b)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || !equalElements(got[0], c.want) {
				t.Fatalf("got %#v (%T), want %#v (%T)", got, got[0], c.want, c.want)
			}
			if _, isBig := c.want.(*big.Int); !isBig {
				if got[0] != c.want {
					t.Fatalf("got %#v (%T), want exactly %#v (%T)", got[0], got[0], c.want, c.want)
				}
			}
		})
	}
}

func TestPackRejects(t *testing.T) {
	deep := Tuple{}
	for range MaxDepth + 1 {
		deep = Tuple{deep}
	}
	cases := []struct {
		name  string
		tuple Tuple
	}{
		{"unsupported type", Tuple{struct{}{}}},
		{"map", Tuple{map[string]int{}}},
		{"invalid UTF-8 string", Tuple{"\xff"}},
		{"nil big.Int", Tuple{(*big.Int)(nil)}},
		{"integer of 256 bytes", Tuple{shl1(2040)}},
		{"negative integer of 256 bytes", Tuple{neg(shl1(2040))}},
		{"unsupported type inside nested tuple", Tuple{1, Tuple{"a", complex(1, 2)}}},
		{"nesting deeper than MaxDepth", deep},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			prefix := []byte("keep")
			got, err := Append(prefix, c.tuple)
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("Append(%v) error = %v, want ErrUnsupported", c.tuple, err)
			}
			if !bytes.Equal(got, prefix) {
				t.Fatalf("Append returned %q on error, want the untouched prefix", got)
			}
		})
	}
}

func TestUnpackRejects(t *testing.T) {
	cases := []struct {
		name string
		in   string
	}{
		{"unknown type code", "\x42"},
		{"deprecated nested tuple code", "\x03\x04"},
		{"deprecated true code", "\x25"},
		{"escape code used as type", "\xff"},
		{"top-level null followed by escape", "\x00\xff"},
		{"unterminated byte string", "\x01abc"},
		{"unterminated string ending in escaped nul", "\x01a\x00\xff"},
		{"unterminated unicode string", "\x02abc"},
		{"invalid UTF-8 in unicode string", "\x02\xc3\x28\x00"},
		{"unterminated nested tuple", "\x05\x15\x01"},
		{"nested tuple missing terminator after null", "\x05\x00\xff"},
		{"truncated 1-byte int", "\x15"},
		{"truncated 8-byte int", "\x1c\x01\x02"},
		{"truncated negative int", "\x0c\x01"},
		{"positive int with leading zero", "\x16\x00\x01"},
		{"negative int with leading 0xff", "\x12\xff\x00"},
		{"8-byte int with leading zero", "\x1c\x00\x00\x00\x00\x00\x00\x00\x01"},
		{"big int missing length", "\x1d"},
		{"big int too short", "\x1d\x09\x01\x00"},
		{"big int with fixed-size length", "\x1d\x08\x01\x00\x00\x00\x00\x00\x00\x00"},
		{"big int with zero length", "\x1d\x00"},
		{"big int with leading zero", "\x1d\x09\x00\x01\x00\x00\x00\x00\x00\x00\x00"},
		{"negative big int with fixed-size length", "\x0b\xf7\x01\x00\x00\x00\x00\x00\x00\x00"},
		{"negative big int with leading 0xff", "\x0b\xf6\xff\x01\x00\x00\x00\x00\x00\x00\x00"},
		{"truncated float", "\x20\x00\x00\x00"},
		{"truncated double", "\x21\x00"},
		{"truncated uuid", "\x30" + strings.Repeat("\x01", 15)},
		{"truncated versionstamp", "\x33" + strings.Repeat("\x01", 11)},
		{"nesting deeper than MaxDepth", strings.Repeat("\x05", MaxDepth+1) + strings.Repeat("\x00", MaxDepth+1)},
		{"deep unterminated nesting", strings.Repeat("\x05", 1<<20)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Unpack([]byte(c.in))
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Unpack(%x) = %v, %v; want ErrMalformed", c.in, got, err)
			}
		})
	}
}

func TestUnpackAcceptsMaxDepth(t *testing.T) {
	in := strings.Repeat("\x05", MaxDepth) + strings.Repeat("\x00", MaxDepth)
	got, err := Unpack([]byte(in))
	if err != nil {
		t.Fatalf("Unpack of %d nested tuples: %v", MaxDepth, err)
	}
	out, err := got.Pack()
	if err != nil || string(out) != in {
		t.Fatalf("re-Pack = %x, %v; want the input back", out, err)
	}
}

func TestUUIDString(t *testing.T) {
	u := UUID{0x12, 0x3e, 0x45, 0x67, 0xe8, 0x9b, 0x12, 0xd3, 0xa4, 0x56, 0x42, 0x66, 0x14, 0x17, 0x40, 0x00}
	if got, want := u.String(), "123e4567-e89b-12d3-a456-426614174000"; got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

// TestOrderOfKnownTuples checks that the encoded byte order of a list that is
// sorted in tuple order is that same order. The list follows the spirit of
// comparisons() in the Java bindings' TupleTest.java, sorted by hand.
func TestOrderOfKnownTuples(t *testing.T) {
	nan32 := math.Float32frombits(0x7fc00000)
	negNaN32 := math.Float32frombits(0xffc00000)
	sorted := []Tuple{
		{},
		{nil},
		{nil, nil},
		{nil, []byte{}},
		{nil, []byte{0x00}},
		{[]byte{}},
		{[]byte{0x00}},
		{[]byte{0x00}, nil},
		{[]byte{0x00, 0xff}},
		{[]byte{0x01}},
		{""},
		{"a"},
		{"a", nil},
		{"a\x00"},
		{"\u03bc\u03ac"},
		{"\U0001f525"},
		{Tuple{}},
		{Tuple{}, nil},
		{Tuple{nil}},
		{Tuple{nil, []byte{}}},
		{Tuple{nil, Tuple{}}},
		{Tuple{[]byte{}}},
		{Tuple{1}},
		{Tuple{1}, nil},
		{Tuple{1, nil}},
		{Tuple{1, 2}},
		{neg(shl1(2039))},
		{neg(shl1(64))},
		{neg(add(shl1(64), -1))},
		{add(big.NewInt(math.MinInt64), -1)},
		{int64(math.MinInt64)},
		{-65536},
		{-256},
		{-255},
		{-1},
		{0},
		{1},
		{255},
		{256},
		{int64(math.MaxInt64)},
		{uint64(math.MaxUint64)},
		{shl1(64)},
		{shl1(2039)},
		{negNaN32},
		{float32(math.Inf(-1))},
		{float32(-1)},
		{float32(math.Copysign(0, -1))},
		{float32(0)},
		{float32(1)},
		{float32(math.Inf(1))},
		{nan32},
		{math.Inf(-1)},
		{-math.MaxFloat64},
		{-math.SmallestNonzeroFloat64},
		{math.Copysign(0, -1)},
		{0.0},
		{math.SmallestNonzeroFloat64},
		{math.NaN()},
		{false},
		{true},
		{UUID{}},
		{UUID{0: 1}},
		{Versionstamp{}},
		{Versionstamp{UserVersion: 1}},
		{Versionstamp{TransactionVersion: [10]byte{0: 1}}},
	}
	var prev []byte
	for i, tup := range sorted {
		b, err := tup.Pack()
		if err != nil {
			t.Fatalf("Pack(%v): %v", tup, err)
		}
		if i > 0 {
			if bytes.Compare(prev, b) >= 0 {
				t.Errorf("Pack(%v) = %x does not sort after Pack(%v) = %x", tup, b, sorted[i-1], prev)
			}
			if c := compareTuples(sorted[i-1], tup); c >= 0 {
				t.Errorf("reference order says %v >= %v (%d)", sorted[i-1], tup, c)
			}
		}
		prev = b
	}
}
