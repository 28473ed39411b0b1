package backupstore_test

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"gocloud.dev/blob"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/proxytest"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// deleteRequestKeys reads the keys of a DeleteObjects request.
func deleteRequestKeys(t testing.TB, r *http.Request) []string {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Errorf("read DeleteObjects request: %v", err)
		return nil
	}
	var req struct {
		Objects []struct{ Key string } `xml:"Object"`
	}
	if err := xml.Unmarshal(body, &req); err != nil {
		t.Errorf("DeleteObjects request %q: %v", body, err)
		return nil
	}
	keys := make([]string, len(req.Objects))
	for i, o := range req.Objects {
		keys[i] = o.Key
	}
	return keys
}

// s3DeleteResult is a DeleteObjects response body: deleted keys and error
// entries (a nil key leaves <Key> out).
func s3DeleteResult(deleted []string, errKeys []*string, code string) string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`)
	for _, k := range deleted {
		fmt.Fprintf(&b, "<Deleted><Key>%s</Key></Deleted>", k)
	}
	for _, k := range errKeys {
		b.WriteString("<Error>")
		if k != nil {
			fmt.Fprintf(&b, "<Key>%s</Key>", *k)
		}
		fmt.Fprintf(&b, "<Code>%s</Code><Message>injected</Message></Error>", code)
	}
	b.WriteString("</DeleteResult>")
	return b.String()
}

func writeXML(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/xml")
	io.WriteString(w, body)
}

// TestDeletePrefixCountsOnlyConfirmedS3Deletions: the store deletes all
// keys of a DeleteObjects request but the last, and reports the last with an
// error entry that does not name it as sent. That key is a failure, never a
// deletion.
func TestDeletePrefixCountsOnlyConfirmedS3Deletions(t *testing.T) {
	for _, tc := range []struct {
		name   string
		errKey func(key string) *string
	}{
		{"error entry with the key spelled differently", func(k string) *string { s := strings.ReplaceAll(k, "/", "%2F"); return &s }},
		{"error entry without a key", func(string) *string { return nil }},
		{"error entry naming another key twice", func(string) *string { s := "backups/u/other"; return &s }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := testenv.S3(t)
			direct := openStore(t, s)
			keys := fill(t, direct, "backups/u/", 3, 8)
			p := proxytest.Start(t, s.Endpoint)
			p.SetHandler(func(w http.ResponseWriter, r *http.Request) bool {
				if !isDeleteObjects(r) {
					return false
				}
				sent := deleteRequestKeys(t, r)
				if len(sent) == 0 {
					http.Error(w, "no keys", http.StatusBadRequest)
					return true
				}
				last := sent[len(sent)-1]
				for _, k := range sent[:len(sent)-1] {
					if err := direct.Delete(context.Background(), k); err != nil {
						t.Errorf("delete %s: %v", k, err)
					}
				}
				writeXML(w, s3DeleteResult(sent[:len(sent)-1], []*string{tc.errKey(last), tc.errKey(last)}, "AccessDenied"))
				return true
			})
			res, err := backupstore.DeletePrefix(context.Background(), viaProxy(t, s, p), "backups/u/", nil)
			var de *backupstore.DeleteError
			if !errors.As(err, &de) {
				t.Fatalf("DeletePrefix = %+v, %v; want a *DeleteError naming %s", res.DeleteProgress, err, keys[2])
			}
			if diff := cmp.Diff([]string{keys[2]}, de.Keys()); diff != "" {
				t.Errorf("failed keys (-want +got):\n%s", diff)
			}
			if res.Deleted != 2 || res.Failed != 1 {
				t.Errorf("%+v; want 2 deleted, 1 failed", res.DeleteProgress)
			}
			if diff := cmp.Diff([]string{keys[2]}, keysOf(snapshot(t, direct, ""))); diff != "" {
				t.Errorf("objects left (-want +got):\n%s", diff)
			}
		})
	}
}

func keysOf(m map[string]object) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestDeletePrefixRecordsFailuresWhileListingWithoutARace: deletions fail
// for good (403 per key, answered slowly) while the listing of later pages
// goes on; run under -race, the failed-keys bookkeeping is read and written
// under its lock only, and every key is reported failed.
func TestDeletePrefixRecordsFailuresWhileListingWithoutARace(t *testing.T) {
	s := testenv.S3(t)
	direct := openStore(t, s)
	keys := fill(t, direct, "backups/r/", 4000, 8)
	p := proxytest.Start(t, s.Endpoint)
	var requests atomic.Int64
	p.SetHandler(func(w http.ResponseWriter, r *http.Request) bool {
		if !isDeleteObjects(r) {
			return false
		}
		requests.Add(1)
		sent := deleteRequestKeys(t, r)
		errKeys := make([]*string, len(sent))
		for i := range sent {
			errKeys[i] = &sent[i]
		}
		time.Sleep(time.Second)
		writeXML(w, s3DeleteResult(nil, errKeys, "AccessDenied"))
		return true
	})
	var b *blob.Bucket = viaProxy(t, s, p)
	// One worker: the listing blocks handing on the third batch while the
	// worker records the failures of the first.
	res, err := backupstore.DeletePrefix(context.Background(), b, "backups/r/", &backupstore.DeleteOptions{Concurrency: 1})
	var de *backupstore.DeleteError
	if !errors.As(err, &de) || len(de.Failed) != len(keys) || res.Deleted != 0 {
		t.Fatalf("DeletePrefix = %+v, %v; want all %d keys failed", res.DeleteProgress, err, len(keys))
	}
	if n := len(snapshot(t, direct, "backups/r/")); n != len(keys) {
		t.Errorf("%d objects left; want %d", n, len(keys))
	}
	t.Logf("%d DeleteObjects requests", requests.Load())
}
