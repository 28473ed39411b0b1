package plugin

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/gcsstore"
)

// gcsLifecycle reads a bucket's lifecycle rules through the GCS client and
// keeps those that delete objects under all or part of the prefix. The
// emulator testenv runs (fake-gcs-server) keeps no lifecycle rules, so the
// bucket's metadata here is the JSON API's, served by the test, as GCS
// documents it (https://cloud.google.com/storage/docs/json_api/v1/buckets):
// what is checked is which rules the command shows, not GCS's behaviour.
func TestGCSLifecycle(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/b/backups") {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotImplemented)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"storage#bucket","name":"backups","lifecycle":{"rule":[
			{"action":{"type":"Delete"},"condition":{"age":30,"matchesPrefix":["db/"]}},
			{"action":{"type":"Delete"},"condition":{"age":7,"matchesPrefix":["db/1/tmp/"]}},
			{"action":{"type":"Delete"},"condition":{"age":90}},
			{"action":{"type":"Delete"},"condition":{"daysSinceNoncurrentTime":3,"matchesPrefix":["logs/","db/1/"]}},
			{"action":{"type":"Delete"},"condition":{"age":1,"matchesPrefix":["db/"],"matchesSuffix":[".tmp"]}},
			{"action":{"type":"Delete"},"condition":{"age":5,"matchesPrefix":["other/"]}},
			{"action":{"type":"SetStorageClass","storageClass":"COLDLINE"},"condition":{"age":10}}
		]}}`))
	}))
	defer srv.Close()

	ctx := context.Background()
	url := "gs://backups/db/1/?endpoint=" + srv.URL + "&anonymous=true"
	bucketURL, prefix, err := splitPrefixURL(url)
	if err != nil {
		t.Fatal(err)
	}
	b, err := backupstore.OpenBucket(ctx, bucketURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	u, err := backupstore.ParseURL(bucketURL)
	if err != nil {
		t.Fatal(err)
	}
	var v PrefixView
	if err := gcsLifecycle(ctx, b, u, prefix, &v); err != nil {
		t.Fatal(err)
	}
	type rule struct {
		prefix               string
		all                  bool
		days, noncurrentDays int32
	}
	var got []rule
	for _, r := range v.Lifecycle {
		got = append(got, rule{r.Prefix, r.All, r.Days, r.NoncurrentDays})
	}
	want := []rule{
		{"db/", true, 30, 0},
		{"db/1/tmp/", false, 7, 0},
		{"", true, 90, 0},
		{"db/1/", true, 0, 3}, // listed by the prefix that covers db/1/
		{"db/", false, 1, 0},  // .tmp objects only
	}
	if len(got) != len(want) {
		t.Fatalf("rules %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("rule %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
