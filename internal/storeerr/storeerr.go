// Package storeerr defines backupstore's sentinel errors in a package that
// imports nothing but errors. backupstore re-exports each as the same value
// (backupstore.ErrInvalidConfig is storeerr.ErrInvalidConfig), which is the
// name users know and the one documented there; crt classifies them for
// Terminal through this package, so that an operator that imports crt
// without backupstore does not link the cloud SDKs behind it.
//
// A new sentinel of backupstore is declared here and re-exported there:
// crt's TestEveryErrorIsClassified says so when one is not.
package storeerr

import "errors"

var (
	ErrInvalidConfig     = errors.New("backupstore: invalid configuration")
	ErrUnsafePrefix      = errors.New("backupstore: unsafe prefix")
	ErrSecretNotFound    = errors.New("backupstore: credentials secret not found")
	ErrSecretKeyMissing  = errors.New("backupstore: credentials secret lacks a required key")
	ErrUnsupportedScheme = errors.New("backupstore: unsupported URL scheme")
	ErrIncomplete        = errors.New("backupstore: deletion incomplete")
	ErrRetained          = errors.New("backupstore: retained by object lock")
	ErrExpiryUnsupported = errors.New("backupstore: server-side expiry is not supported for this store")
	ErrTooManyRules      = errors.New("backupstore: the bucket's lifecycle configuration would exceed the store's rule limit")
	ErrTargetDiffers     = errors.New("backupstore: the target holds other content at the key")
	ErrBucketFull        = errors.New("backupstore: bucket holds its limit of entries")
	ErrPoolFull          = errors.New("share: every bucket of the pool is full")
	ErrNotOwned          = errors.New("share: the store's bucket is not the bucket object's")
	ErrStoreNotEmpty     = errors.New("share: the store's bucket holds objects besides its owner marker")
	ErrLegacyNotCopied   = errors.New("share: legacy objects not copied")
	ErrLegacyInUse       = errors.New("share: another entry's migration has not copied the legacy location yet")
	// ErrWriterRunning is crt/backups': crt, which classifies it, cannot
	// import crt/backups (which imports crt).
	ErrWriterRunning = errors.New("backups: the writer still has pods")
)
