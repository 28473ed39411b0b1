package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/examples/aerospike-gc/api"
	"github.com/groundskeeper-io/groundskeeper/retention"
)

func TestDecide(t *testing.T) {
	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		ttl     string
		now     time.Time
		expired bool
		at      time.Time // when it expires, if kept; zero: never
		err     string
	}{
		{name: "ttl 7d, created 7d minus 1ns ago: kept until then", ttl: "7d", now: created.Add(7*retention.Day - 1), at: created.Add(7 * retention.Day)},
		{name: "ttl 7d, created exactly 7d ago: expired", ttl: "7d", now: created.Add(7 * retention.Day), expired: true},
		{name: "ttl 30d, created 8d ago: kept", ttl: "30d", now: created.Add(8 * retention.Day), at: created.Add(30 * retention.Day)},
		{name: "ttl 0d: kept forever", ttl: "0d", now: created.Add(1000 * retention.Day)},
		{name: "ttl 0: kept forever", ttl: "0", now: created.Add(1000 * retention.Day)},
		{name: "no ttl: kept forever", ttl: "", now: created.Add(1000 * retention.Day)},
		{name: "ttl 12h: hours work too", ttl: "12h", now: created.Add(12 * time.Hour), expired: true},
		{name: "created in the future (clock skew): kept until creation + ttl", ttl: "1d", now: created.Add(-time.Hour), at: created.Add(retention.Day)},
		{name: "ttl 30D: refused, naming the field and the value", ttl: "30D", now: created, err: `spec.ttl "30D"`},
		{name: "ttl -1d: refused", ttl: "-1d", now: created, err: `spec.ttl "-1d"`},
		{name: "ttl 30 without a unit: refused", ttl: "30", now: created, err: `spec.ttl "30"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &api.AerospikeNamespaceBackup{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", CreationTimestamp: metav1.NewTime(created)},
				Spec:       api.AerospikeNamespaceBackupSpec{TTL: tc.ttl},
			}
			expired, at, err := decide(b, tc.now)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, retention.ErrInvalidDuration) {
					t.Fatalf("err = %v, want one naming %s that is retention.ErrInvalidDuration", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if expired != tc.expired || !at.Equal(tc.at) {
				t.Errorf("decide = %v, %s; want %v, %s", expired, at, tc.expired, tc.at)
			}
		})
	}
}

func TestStorageURLAndPrefix(t *testing.T) {
	for _, tc := range []struct {
		name    string
		storage api.BackupStorageSpec
		url     string
		prefix  string
		err     string
	}{
		{name: "gcs bucket, default prefix", storage: api.BackupStorageSpec{Type: "gcs", Bucket: "bk"}, url: "gs://bk", prefix: "backups/ns/ns1-b1/"},
		{name: "s3 bucket, own prefix", storage: api.BackupStorageSpec{Type: "s3", Bucket: "bk", Prefix: "aerospike/prod"}, url: "s3://bk", prefix: "aerospike/prod/ns/ns1-b1/"},
		{name: "azure container", storage: api.BackupStorageSpec{Type: "azure", Bucket: "bk"}, url: "azblob://bk", prefix: "backups/ns/ns1-b1/"},
		{name: "unknown type: refused, naming the field and the value", storage: api.BackupStorageSpec{Type: "ftp", Bucket: "bk"}, err: `spec.storage.type "ftp"`},
		{name: "bucket with a path: refused", storage: api.BackupStorageSpec{Type: "s3", Bucket: "bk/x"}, err: `spec.storage.bucket "bk/x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &api.AerospikeNamespaceBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ns1-b1"},
				Spec: api.AerospikeNamespaceBackupSpec{Storage: tc.storage}}
			url, err := storageURL(tc.storage)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one naming %s", err, tc.err)
				}
				return
			}
			if err != nil || url != tc.url {
				t.Errorf("storageURL = %q, %v; want %q", url, err, tc.url)
			}
			if p := dataPrefix(b); p != tc.prefix {
				t.Errorf("dataPrefix = %q, want %q", p, tc.prefix)
			}
		})
	}
}

// A backup's prefix ends in "/", so that ns1-b1 never selects ns1-b10's
// data, and a ".." in spec.storage.prefix reaches backupstore's check
// instead of being resolved away.
func TestDataPrefixIsSafe(t *testing.T) {
	b := &api.AerospikeNamespaceBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ns1-b1"}}
	if p := dataPrefix(b); strings.HasPrefix("backups/ns/ns1-b10/data", p) {
		t.Errorf("prefix %q selects ns1-b10's data", p)
	}
	b.Spec.Storage.Prefix = "backups/../other"
	if err := backupstore.CheckPrefix(dataPrefix(b), backupstore.PrefixRules{}); !errors.Is(err, backupstore.ErrUnsafePrefix) {
		t.Errorf("CheckPrefix(%q) = %v, want ErrUnsafePrefix", dataPrefix(b), err)
	}
}
