package tuple

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"math/big"
	"unicode/utf8"
)

// Tuple is an ordered list of elements. Pack accepts elements of these types:
// nil, []byte, string (valid UTF-8), Tuple, bool, int, int8, int16, int32,
// int64, uint, uint8, uint16, uint32, uint64, *big.Int, big.Int, float32,
// float64, UUID and Versionstamp.
type Tuple []any

// UUID is an RFC 4122 UUID in network byte order (type code 0x30).
type UUID [16]byte

// String formats u in the canonical 8-4-4-4-12 hexadecimal form.
func (u UUID) String() string {
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Versionstamp is a 96-bit FoundationDB versionstamp (type code 0x33): ten
// bytes of transaction version (commit version and batch number, big endian)
// followed by a two-byte user version.
type Versionstamp struct {
	TransactionVersion [10]byte
	UserVersion        uint16
}

// ErrMalformed is wrapped by every error Unpack returns for bytes that are not
// a canonical tuple encoding.
var ErrMalformed = errors.New("malformed tuple encoding")

// ErrUnsupported is wrapped by every error Pack returns for a value it cannot
// encode.
var ErrUnsupported = errors.New("value cannot be encoded as a tuple element")

// MaxDepth is the deepest nesting of tuples Pack and Unpack accept. The
// official bindings have no limit; we have one so that hostile input cannot
// exhaust the stack.
const MaxDepth = 1000

// Type codes, from design/tuple.md.
const (
	codeNull         = 0x00
	codeBytes        = 0x01
	codeString       = 0x02
	codeNested       = 0x05
	codeNegBig       = 0x0b // negative integer of 9 to 255 bytes
	codeNeg8         = 0x0c // negative integer of 8 bytes
	codeZero         = 0x14
	codePos8         = 0x1c // positive integer of 8 bytes
	codePosBig       = 0x1d // positive integer of 9 to 255 bytes
	codeFloat        = 0x20
	codeDouble       = 0x21
	codeFalse        = 0x26
	codeTrue         = 0x27
	codeUUID         = 0x30
	codeVersionstamp = 0x33

	escape = 0xff
)

// Pack encodes t.
func (t Tuple) Pack() ([]byte, error) {
	return Append(make([]byte, 0, 32), t)
}

// Append appends the encoding of t to dst. On error, dst is returned
// unchanged in length.
func Append(dst []byte, t Tuple) ([]byte, error) {
	n := len(dst)
	out, err := appendTuple(dst, t, false, 0)
	if err != nil {
		return dst[:n], err
	}
	return out, nil
}

func appendTuple(b []byte, t Tuple, nested bool, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return b, fmt.Errorf("tuple nested deeper than %d: %w", MaxDepth, ErrUnsupported)
	}
	for i, e := range t {
		var err error
		b, err = appendElement(b, e, nested, depth)
		if err != nil {
			return b, fmt.Errorf("element %d: %w", i, err)
		}
	}
	return b, nil
}

func appendElement(b []byte, e any, nested bool, depth int) ([]byte, error) {
	switch e := e.(type) {
	case nil:
		b = append(b, codeNull)
		if nested {
			// Inside a nested tuple a bare 0x00 ends the tuple, so a null
			// element is escaped.
			b = append(b, escape)
		}
		return b, nil
	case []byte:
		return appendBytes(b, codeBytes, e), nil
	case string:
		if !utf8.ValidString(e) {
			return b, fmt.Errorf("string %q is not valid UTF-8: %w", e, ErrUnsupported)
		}
		return appendBytes(b, codeString, []byte(e)), nil
	case Tuple:
		b = append(b, codeNested)
		b, err := appendTuple(b, e, true, depth+1)
		if err != nil {
			return b, err
		}
		return append(b, codeNull), nil
	case bool:
		if e {
			return append(b, codeTrue), nil
		}
		return append(b, codeFalse), nil
	case int:
		return appendInt(b, int64(e)), nil
	case int8:
		return appendInt(b, int64(e)), nil
	case int16:
		return appendInt(b, int64(e)), nil
	case int32:
		return appendInt(b, int64(e)), nil
	case int64:
		return appendInt(b, e), nil
	case uint:
		return appendUint(b, uint64(e)), nil
	case uint8:
		return appendUint(b, uint64(e)), nil
	case uint16:
		return appendUint(b, uint64(e)), nil
	case uint32:
		return appendUint(b, uint64(e)), nil
	case uint64:
		return appendUint(b, e), nil
	case *big.Int:
		if e == nil {
			return b, fmt.Errorf("nil *big.Int: %w", ErrUnsupported)
		}
		return appendBigInt(b, e)
	case big.Int:
		return appendBigInt(b, &e)
	case float32:
		var s [4]byte
		binary.BigEndian.PutUint32(s[:], orderFloatBits32(math.Float32bits(e)))
		return append(append(b, codeFloat), s[:]...), nil
	case float64:
		var s [8]byte
		binary.BigEndian.PutUint64(s[:], orderFloatBits64(math.Float64bits(e)))
		return append(append(b, codeDouble), s[:]...), nil
	case UUID:
		return append(append(b, codeUUID), e[:]...), nil
	case Versionstamp:
		b = append(append(b, codeVersionstamp), e.TransactionVersion[:]...)
		return binary.BigEndian.AppendUint16(b, e.UserVersion), nil
	default:
		return b, fmt.Errorf("type %T: %w", e, ErrUnsupported)
	}
}

// appendBytes writes code, v with every 0x00 escaped as 0x00 0xff, and the
// 0x00 terminator.
func appendBytes(b []byte, code byte, v []byte) []byte {
	b = append(b, code)
	for _, c := range v {
		b = append(b, c)
		if c == 0x00 {
			b = append(b, escape)
		}
	}
	return append(b, 0x00)
}

// byteLen is the number of bytes needed to hold u big endian.
func byteLen(u uint64) int {
	n := 0
	for u != 0 {
		n++
		u >>= 8
	}
	return n
}

func appendUint(b []byte, u uint64) []byte {
	n := byteLen(u)
	b = append(b, byte(codeZero+n))
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], u)
	return append(b, s[8-n:]...)
}

func appendInt(b []byte, i int64) []byte {
	if i >= 0 {
		return appendUint(b, uint64(i))
	}
	// Magnitude as uint64; correct for math.MinInt64 too (two's complement).
	mag := -uint64(i)
	n := byteLen(mag)
	b = append(b, byte(codeZero-n))
	// One's complement of the magnitude within n bytes.
	var s [8]byte
	binary.BigEndian.PutUint64(s[:], ^mag)
	return append(b, s[8-n:]...)
}

func appendBigInt(b []byte, v *big.Int) ([]byte, error) {
	if v.IsInt64() {
		return appendInt(b, v.Int64()), nil
	}
	if v.IsUint64() {
		return appendUint(b, v.Uint64()), nil
	}
	mag := new(big.Int).Abs(v).Bytes()
	n := len(mag)
	if n <= 8 {
		// Negative, between -(2^64-1) and math.MinInt64-1.
		var m uint64
		for _, c := range mag {
			m = m<<8 | uint64(c)
		}
		var s [8]byte
		binary.BigEndian.PutUint64(s[:], ^m)
		return append(append(b, codeNeg8), s[:]...), nil
	}
	if n > 255 {
		return b, fmt.Errorf("integer of %d bytes exceeds the 255-byte maximum: %w", n, ErrUnsupported)
	}
	if v.Sign() > 0 {
		b = append(b, codePosBig, byte(n))
		return append(b, mag...), nil
	}
	b = append(b, codeNegBig, byte(n)^0xff)
	for _, c := range mag {
		b = append(b, ^c)
	}
	return b, nil
}

// orderFloatBits32 applies the tuple layer's float transform: flip every bit
// of a negative number, only the sign bit of a positive one, so that unsigned
// byte order is IEEE total order.
func orderFloatBits32(u uint32) uint32 {
	if u&(1<<31) != 0 {
		return ^u
	}
	return u ^ 1<<31
}

func unorderFloatBits32(u uint32) uint32 {
	if u&(1<<31) == 0 {
		return ^u
	}
	return u ^ 1<<31
}

func orderFloatBits64(u uint64) uint64 {
	if u&(1<<63) != 0 {
		return ^u
	}
	return u ^ 1<<63
}

func unorderFloatBits64(u uint64) uint64 {
	if u&(1<<63) == 0 {
		return ^u
	}
	return u ^ 1<<63
}

// Unpack decodes a tuple. It accepts only canonical encodings; see the package
// documentation.
func Unpack(b []byte) (Tuple, error) {
	d := decoder{buf: b}
	t, err := d.tuple(false, 0)
	if err != nil {
		return nil, err
	}
	return t, nil
}

type decoder struct {
	buf []byte
	pos int
}

func (d *decoder) errorf(at int, format string, args ...any) error {
	return fmt.Errorf("tuple: byte %d: %s: %w", at, fmt.Sprintf(format, args...), ErrMalformed)
}

// take returns the next n bytes, or an error naming what was being decoded.
func (d *decoder) take(n int, what string, start int) ([]byte, error) {
	if len(d.buf)-d.pos < n {
		return nil, d.errorf(start, "%s needs %d bytes, %d left", what, n, len(d.buf)-d.pos)
	}
	v := d.buf[d.pos : d.pos+n]
	d.pos += n
	return v, nil
}

func (d *decoder) tuple(nested bool, depth int) (Tuple, error) {
	if depth > MaxDepth {
		return nil, d.errorf(d.pos, "tuple nested deeper than %d", MaxDepth)
	}
	t := Tuple{}
	for d.pos < len(d.buf) {
		start := d.pos
		code := d.buf[d.pos]
		d.pos++
		if code == codeNull {
			if !nested {
				t = append(t, nil)
				continue
			}
			if d.pos < len(d.buf) && d.buf[d.pos] == escape {
				d.pos++
				t = append(t, nil)
				continue
			}
			return t, nil // end of the nested tuple
		}
		e, err := d.element(code, start, depth)
		if err != nil {
			return nil, err
		}
		t = append(t, e)
	}
	if nested {
		return nil, d.errorf(len(d.buf), "nested tuple is not terminated")
	}
	return t, nil
}

func (d *decoder) element(code byte, start, depth int) (any, error) {
	switch {
	case code == codeBytes:
		return d.bytes(start)
	case code == codeString:
		v, err := d.bytes(start)
		if err != nil {
			return nil, err
		}
		if !utf8.Valid(v) {
			return nil, d.errorf(start, "unicode string is not valid UTF-8")
		}
		return string(v), nil
	case code == codeNested:
		return d.tuple(true, depth+1)
	case code == codeNegBig || code == codePosBig:
		return d.bigInt(code, start)
	case code >= codeNeg8 && code <= codePos8:
		return d.int(code, start)
	case code == codeFloat:
		v, err := d.take(4, "float", start)
		if err != nil {
			return nil, err
		}
		return math.Float32frombits(unorderFloatBits32(binary.BigEndian.Uint32(v))), nil
	case code == codeDouble:
		v, err := d.take(8, "double", start)
		if err != nil {
			return nil, err
		}
		return math.Float64frombits(unorderFloatBits64(binary.BigEndian.Uint64(v))), nil
	case code == codeFalse:
		return false, nil
	case code == codeTrue:
		return true, nil
	case code == codeUUID:
		v, err := d.take(16, "UUID", start)
		if err != nil {
			return nil, err
		}
		return UUID(v), nil
	case code == codeVersionstamp:
		v, err := d.take(12, "versionstamp", start)
		if err != nil {
			return nil, err
		}
		return Versionstamp{
			TransactionVersion: [10]byte(v[:10]),
			UserVersion:        binary.BigEndian.Uint16(v[10:]),
		}, nil
	default:
		return nil, d.errorf(start, "unknown or unsupported type code 0x%02x", code)
	}
}

// bytes decodes an escaped, 0x00-terminated byte string.
func (d *decoder) bytes(start int) ([]byte, error) {
	v := []byte{}
	for d.pos < len(d.buf) {
		c := d.buf[d.pos]
		d.pos++
		if c != 0x00 {
			v = append(v, c)
			continue
		}
		if d.pos < len(d.buf) && d.buf[d.pos] == escape {
			d.pos++
			v = append(v, 0x00)
			continue
		}
		return v, nil
	}
	return nil, d.errorf(start, "string is not terminated")
}

func (d *decoder) int(code byte, start int) (any, error) {
	if code == codeZero {
		return int64(0), nil
	}
	n := int(code) - codeZero
	neg := n < 0
	if neg {
		n = -n
	}
	v, err := d.take(n, "integer", start)
	if err != nil {
		return nil, err
	}
	var u uint64
	for _, c := range v {
		u = u<<8 | uint64(c)
	}
	if !neg {
		if v[0] == 0x00 {
			return nil, d.errorf(start, "integer has a leading zero byte")
		}
		if u <= math.MaxInt64 {
			return int64(u), nil
		}
		return u, nil
	}
	if v[0] == 0xff {
		return nil, d.errorf(start, "negative integer has a leading 0xff byte")
	}
	// u is the one's complement of the magnitude within n bytes.
	mag := ^u
	if n < 8 {
		mag &= 1<<(8*n) - 1
	}
	if mag <= 1<<63 {
		return -int64(mag-1) - 1, nil
	}
	return new(big.Int).Neg(new(big.Int).SetUint64(mag)), nil
}

func (d *decoder) bigInt(code byte, start int) (any, error) {
	lb, err := d.take(1, "big integer length", start)
	if err != nil {
		return nil, err
	}
	n := int(lb[0])
	if code == codeNegBig {
		n ^= 0xff
	}
	if n <= 8 {
		return nil, d.errorf(start, "big integer of %d bytes should use a fixed-size code", n)
	}
	v, err := d.take(n, "big integer", start)
	if err != nil {
		return nil, err
	}
	if code == codePosBig {
		if v[0] == 0x00 {
			return nil, d.errorf(start, "big integer has a leading zero byte")
		}
		return new(big.Int).SetBytes(v), nil
	}
	if v[0] == 0xff {
		return nil, d.errorf(start, "negative big integer has a leading 0xff byte")
	}
	mag := make([]byte, n)
	for i, c := range v {
		mag[i] = ^c
	}
	return new(big.Int).Neg(new(big.Int).SetBytes(mag)), nil
}
