// Package tuple is a pure-Go codec of the FoundationDB tuple layer,
// byte-compatible with the official bindings, which need the FoundationDB C
// client library even to encode.
//
// Start with [Tuple.Pack] and [Unpack]:
//
//	b, err := tuple.Tuple{"lock-id", int64(start), int64(end)}.Pack()
//	t, err := tuple.Unpack(b)
//
// Pack writes exactly the bytes the official bindings write, Unpack accepts
// exactly what Pack writes, and malformed input is an error, never a panic.
//
// # Encoding
//
// The encoding is specified by design/tuple.md in the FoundationDB
// repository. Encoded tuples sort, as unsigned bytes, in the same order as the
// tuples they encode: element by element, a shorter tuple before any tuple it
// is a prefix of, elements of different types ordered by type code, integers
// by value whatever their Go type, floats in IEEE total order (so -0 sorts
// before +0 and NaNs at the ends).
//
// # Guarantees
//
//   - Pack produces exactly the bytes the official bindings produce for the
//     same values (Go, Java and Python agree on every type supported here).
//   - Unpack accepts exactly the canonical encodings Pack produces: for every
//     b that Unpack accepts, Pack(Unpack(b)) == b. Non-canonical integers
//     (leading zero bytes, a big-integer code for a value that fits in eight
//     bytes) and strings that are not UTF-8 are rejected, although some
//     official decoders accept them; no official encoder writes them.
//   - Malformed input makes Unpack return an error wrapping ErrMalformed; it
//     never panics. Values Pack cannot encode make it return an error
//     wrapping ErrUnsupported.
//
// # Not supported
//
// The deprecated nested-tuple codes 0x03/0x04, the deprecated true code
// 0x25, arbitrary-precision decimals, 64-bit identifiers, 80-bit
// versionstamps and user type codes; and packing with an incomplete
// versionstamp offset (PackWithVersionstamp), which only makes sense
// against a database.
//
// # Decoded types
//
// Decoded element types are normalised as in the official Go bindings: nil,
// []byte, string, Tuple, bool, int64 (uint64 for positive values above
// math.MaxInt64 that fit in eight bytes, *big.Int beyond that), float32,
// float64, UUID and Versionstamp.
package tuple
