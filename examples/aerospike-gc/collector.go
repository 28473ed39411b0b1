package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	// The stores a bucket URL may name: each provider links its cloud's SDK.
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/azurestore" // azblob://
	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/gcsstore" // gs://
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/s3store"  // s3://
	"github.com/groundskeeper-io/groundskeeper/examples/aerospike-gc/api"
)

// backupConfig is how the collector reads an AerospikeNamespaceBackup:
// where its data is, and its own spec.ttl, judged alone; its condition
// goes to status.conditions (the type is a collect.ConditionSetter). The
// rest of the Config (objects, Secrets, clock, dry run) is the caller's.
func backupConfig(c collect.Config[*api.AerospikeNamespaceBackup]) collect.Config[*api.AerospikeNamespaceBackup] {
	c.Location = location
	c.Keep = backupPolicy
	c.Describe = func(b *api.AerospikeNamespaceBackup) string {
		return fmt.Sprintf("spec.ttl %s from %s ran out", b.Spec.TTL, b.CreationTimestamp.UTC().Format(time.RFC3339))
	}
	return c
}

// backupPolicy is the retention policy of one backup: spec.ttl from the
// creation timestamp, where "0d" (or no ttl) keeps it forever.
var backupPolicy = collect.TTLField("spec.ttl", func(b *api.AerospikeNamespaceBackup) string { return b.Spec.TTL })

// location is where a backup's data is: every key under
// <prefix>/<namespace>/<name>/ in the bucket, with the credentials of
// spec.storage.secret.
func location(_ context.Context, b *api.AerospikeNamespaceBackup) (collect.Location, error) {
	url, err := storageURL(b.Spec.Storage)
	return collect.Location{URL: url, Prefix: dataPrefix(b), Secret: b.Spec.Storage.Secret, SecretField: "spec.storage.secret"}, err
}

// storageURL is the gocloud URL of a backup's bucket.
func storageURL(s api.BackupStorageSpec) (string, error) {
	scheme, ok := map[string]string{"gcs": "gs", "s3": "s3", "azure": "azblob"}[s.Type]
	if !ok {
		return "", fmt.Errorf("spec.storage.type %q: want gcs, s3 or azure", s.Type)
	}
	if s.Bucket == "" || strings.ContainsAny(s.Bucket, "/?#") {
		return "", fmt.Errorf("spec.storage.bucket %q: want a bucket name", s.Bucket)
	}
	return scheme + "://" + s.Bucket, nil
}

// dataPrefix is a backup's data prefix. The trailing "/" keeps backup "b1"
// away from "b10"; joined as it is, not cleaned, so that a ".." in
// spec.storage.prefix is refused, not resolved away.
func dataPrefix(b *api.AerospikeNamespaceBackup) string {
	p := b.Spec.Storage.Prefix
	if p == "" {
		p = api.DefaultPrefix
	}
	return p + "/" + b.Namespace + "/" + b.Name + "/"
}
