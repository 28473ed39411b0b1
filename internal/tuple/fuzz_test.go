package tuple

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"math"
	"math/big"
	"testing"
)

// This file holds a reference implementation of tuple order, written from the
// specification's description of the order rather than from the encoding, and
// the fuzz targets that hold the codec to it.

// rank is the order of element types, which is their type code order.
func rank(e any) int {
	switch e := e.(type) {
	case nil:
		return codeNull
	case []byte:
		return codeBytes
	case string:
		return codeString
	case Tuple:
		return codeNested
	case int64, uint64, *big.Int:
		return codeZero
	case float32:
		return codeFloat
	case float64:
		return codeDouble
	case bool:
		if e {
			return codeTrue
		}
		return codeFalse
	case UUID:
		return codeUUID
	case Versionstamp:
		return codeVersionstamp
	}
	panic("rank: unnormalised element")
}

func toBig(e any) *big.Int {
	switch e := e.(type) {
	case int64:
		return big.NewInt(e)
	case uint64:
		return new(big.Int).SetUint64(e)
	case *big.Int:
		return e
	}
	panic("toBig: not an integer")
}

// totalOrderKey32 maps float bits to a signed integer that orders as IEEE 754
// totalOrder: the usual sign-magnitude to two's-complement trick, independent
// of the tuple encoding's transform.
func totalOrderKey32(f float32) int32 {
	k := int32(math.Float32bits(f))
	if k < 0 {
		k ^= math.MaxInt32
	}
	return k
}

func totalOrderKey64(f float64) int64 {
	k := int64(math.Float64bits(f))
	if k < 0 {
		k ^= math.MaxInt64
	}
	return k
}

// compareElements compares two normalised elements in tuple order.
func compareElements(a, b any) int {
	if c := cmp.Compare(rank(a), rank(b)); c != 0 {
		return c
	}
	switch a := a.(type) {
	case nil, bool:
		return 0
	case []byte:
		return bytes.Compare(a, b.([]byte))
	case string:
		return cmp.Compare(a, b.(string)) // byte order of UTF-8 is code point order
	case Tuple:
		return compareTuples(a, b.(Tuple))
	case int64, uint64, *big.Int:
		return toBig(a).Cmp(toBig(b))
	case float32:
		return cmp.Compare(totalOrderKey32(a), totalOrderKey32(b.(float32)))
	case float64:
		return cmp.Compare(totalOrderKey64(a), totalOrderKey64(b.(float64)))
	case UUID:
		bu := b.(UUID)
		return bytes.Compare(a[:], bu[:])
	case Versionstamp:
		bv := b.(Versionstamp)
		if c := bytes.Compare(a.TransactionVersion[:], bv.TransactionVersion[:]); c != 0 {
			return c
		}
		return cmp.Compare(a.UserVersion, bv.UserVersion)
	}
	panic("compareElements: unnormalised element")
}

// compareTuples is lexicographic order over elements; a proper prefix sorts
// first.
func compareTuples(a, b Tuple) int {
	a, b = normalize(a), normalize(b)
	for i := range min(len(a), len(b)) {
		if c := compareElements(a[i], b[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(len(a), len(b))
}

// normalize converts elements to the types Unpack returns.
func normalize(t Tuple) Tuple {
	out := make(Tuple, len(t))
	for i, e := range t {
		out[i] = normalizeElement(e)
	}
	return out
}

func normalizeElement(e any) any {
	switch e := e.(type) {
	case int:
		return int64(e)
	case int8:
		return int64(e)
	case int16:
		return int64(e)
	case int32:
		return int64(e)
	case uint:
		return normalizeElement(uint64(e))
	case uint8:
		return int64(e)
	case uint16:
		return int64(e)
	case uint32:
		return int64(e)
	case uint64:
		if e <= math.MaxInt64 {
			return int64(e)
		}
		return e
	case big.Int:
		return normalizeElement(&e)
	case *big.Int:
		if e.IsInt64() {
			return e.Int64()
		}
		if e.IsUint64() {
			return e.Uint64()
		}
		return e
	case Tuple:
		return normalize(e)
	}
	return e
}

func equalElements(a, b any) bool {
	a, b = normalizeElement(a), normalizeElement(b)
	switch a := a.(type) {
	case []byte:
		bb, ok := b.([]byte)
		return ok && bytes.Equal(a, bb)
	case *big.Int:
		bb, ok := b.(*big.Int)
		return ok && a.Cmp(bb) == 0
	case float32:
		bb, ok := b.(float32)
		return ok && math.Float32bits(a) == math.Float32bits(bb)
	case float64:
		bb, ok := b.(float64)
		return ok && math.Float64bits(a) == math.Float64bits(bb)
	case Tuple:
		bb, ok := b.(Tuple)
		return ok && equalTuples(a, bb)
	}
	return a == b
}

func equalTuples(a, b Tuple) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !equalElements(a[i], b[i]) {
			return false
		}
	}
	return true
}

// generator builds a tuple from fuzzer bytes, so that every input is a valid
// tuple and the fuzzer explores values rather than the decoder's error paths.
type generator struct{ b []byte }

func (g *generator) next() byte {
	if len(g.b) == 0 {
		return 0
	}
	c := g.b[0]
	g.b = g.b[1:]
	return c
}

func (g *generator) bytesN(n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = g.next()
	}
	return out
}

var runes = []string{"\x00", "a", "b", "\xc3\xa9", "\xe4\xb8\xad", "\U0001f525", "\U0010ffff", "\x7f"}

func (g *generator) tuple(depth int) Tuple {
	n := int(g.next() % 5)
	t := Tuple{}
	for range n {
		t = append(t, g.element(depth))
	}
	return t
}

func (g *generator) element(depth int) any {
	switch g.next() % 16 {
	case 0:
		return nil
	case 1:
		// Bytes rich in 0x00 and 0xff, the escape-relevant values.
		v := g.bytesN(int(g.next() % 6))
		for i, c := range v {
			switch c % 4 {
			case 0:
				v[i] = 0x00
			case 1:
				v[i] = 0xff
			}
		}
		return v
	case 2:
		var s []byte
		for range int(g.next() % 5) {
			s = append(s, runes[int(g.next())%len(runes)]...)
		}
		return string(s)
	case 3:
		if depth >= 3 {
			return nil
		}
		return g.tuple(depth + 1)
	case 4:
		return int64(int8(g.next()))
	case 5:
		return int64(binary.BigEndian.Uint64(g.bytesN(8))) >> (g.next() % 64)
	case 6:
		return binary.BigEndian.Uint64(g.bytesN(8))
	case 7:
		mag := g.bytesN(int(g.next() % 40))
		v := new(big.Int).SetBytes(mag)
		if g.next()%2 == 0 {
			v.Neg(v)
		}
		return v
	case 8:
		return math.Float32frombits(binary.BigEndian.Uint32(g.bytesN(4)))
	case 9:
		return math.Float64frombits(binary.BigEndian.Uint64(g.bytesN(8)))
	case 10:
		return g.next()%2 == 0
	case 11:
		return UUID(g.bytesN(16))
	case 12:
		return Versionstamp{TransactionVersion: [10]byte(g.bytesN(10)), UserVersion: binary.BigEndian.Uint16(g.bytesN(2))}
	case 13:
		return float32(int8(g.next())) // small floats collide with each other often
	case 14:
		return -int64(g.next()) << (g.next() % 60)
	default:
		return uint32(g.next()) << (g.next() % 24)
	}
}

func seedCorpus(f *testing.F) {
	for _, v := range vectors {
		f.Add(v.want)
	}
}

// FuzzUnpack: every input either fails with ErrMalformed or is a canonical
// encoding that packs back to exactly the same bytes. Never a panic.
func FuzzUnpack(f *testing.F) {
	seedCorpus(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		tup, err := Unpack(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Unpack(%x) error %v does not wrap ErrMalformed", data, err)
			}
			return
		}
		again, err := tup.Pack()
		if err != nil {
			t.Fatalf("Unpack(%x) = %v, which does not pack: %v", data, tup, err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("Unpack(%x) = %v packs to %x", data, tup, again)
		}
	})
}

// FuzzOrder: for generated tuples a and b, Unpack(Pack(x)) == x, and
// bytes.Compare(Pack(a), Pack(b)) agrees with the reference tuple order.
func FuzzOrder(f *testing.F) {
	f.Add([]byte{}, []byte{1})
	f.Add([]byte{3, 4, 5, 0x80, 4, 0x7f}, []byte{3, 4, 5, 0x80, 7, 12})
	f.Add([]byte{2, 7, 9, 1, 2}, []byte{2, 7, 9, 0})
	f.Add([]byte{1, 3, 2, 0}, []byte{1, 3, 1, 0})
	f.Fuzz(func(t *testing.T, ga, gb []byte) {
		a := (&generator{b: ga}).tuple(0)
		b := (&generator{b: gb}).tuple(0)
		pa, err := a.Pack()
		if err != nil {
			t.Fatalf("Pack(%v): %v", a, err)
		}
		pb, err := b.Pack()
		if err != nil {
			t.Fatalf("Pack(%v): %v", b, err)
		}
		back, err := Unpack(pa)
		if err != nil {
			t.Fatalf("Unpack(Pack(%v) = %x): %v", a, pa, err)
		}
		if !equalTuples(back, a) {
			t.Fatalf("Unpack(Pack(%v)) = %v", a, back)
		}
		byBytes := bytes.Compare(pa, pb)
		byTuple := compareTuples(a, b)
		if byBytes != byTuple {
			t.Fatalf("order mismatch for\n a=%#v\n b=%#v\nbytes.Compare(%x, %x) = %d, tuple order = %d", a, b, pa, pb, byBytes, byTuple)
		}
	})
}
