// Package unlinked holds backupstore's tests in a program that links none
// of its providers (s3store, gcsstore, azurestore) but links gocloud's S3
// driver, as a program does that opens S3 buckets with gocloud and forgets
// the provider's import: backupstore must refuse what it cannot handle as
// documented, and name the import to add.
package unlinked
