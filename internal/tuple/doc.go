// Package tuple is a pure-Go codec of the FoundationDB tuple layer,
// byte-compatible with the official bindings, which need the FoundationDB C
// client library even to encode.
package tuple
