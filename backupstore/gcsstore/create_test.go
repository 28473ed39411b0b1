package gcsstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/gcsstore"
)

// CreateBucket asks GCS's JSON API for the bucket in the project and at
// the location it was given: the URL's project= and region=, or the
// service account key's project_id and the credentials' region (the
// emulator the integration tests use ignores a bucket's location, so the
// request is checked here). A taken name (409) is reported as not created,
// whoever holds it.
func TestCreateBucketSendsProjectAndLocation(t *testing.T) {
	var mu sync.Mutex
	var got []string // "project location" of each insert
	taken := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/b"):
			var body struct{ Name, Location string }
			data, _ := io.ReadAll(r.Body)
			if err := json.Unmarshal(data, &body); err != nil {
				t.Errorf("insert body %q: %v", data, err)
			}
			mu.Lock()
			got = append(got, r.URL.Query().Get("project")+" "+body.Location)
			conflict := taken
			mu.Unlock()
			if conflict {
				w.WriteHeader(http.StatusConflict)
				io.WriteString(w, `{"error":{"code":409,"message":"taken"}}`)
				return
			}
			io.WriteString(w, `{"name":"`+body.Name+`"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	base := "gs://pool-2?endpoint=" + srv.URL + "&anonymous=true"
	if created, err := backupstore.CreateBucket(ctx, base+"&project=p1&region=EUROPE-WEST1", nil); err != nil || !created {
		t.Fatalf("created %t, %v", created, err)
	}
	creds := &backupstore.Credentials{Region: "europe-west3",
		ServiceAccountJSON: []byte(`{"type":"service_account","project_id":"p2"}`)}
	if created, err := backupstore.CreateBucket(ctx, base, creds); err != nil || !created {
		t.Fatalf("created %t, %v", created, err)
	}
	mu.Lock()
	taken = true
	mu.Unlock()
	if created, err := backupstore.CreateBucket(ctx, base+"&project=p1&region=EU", nil); err != nil || created {
		t.Errorf("a taken name: created %t, %v; want it reported as existing, not an error", created, err)
	}
	want := []string{"p1 EUROPE-WEST1", "p2 europe-west3", "p1 EU"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("inserts %q, want %q", got, want)
	}
	for _, tc := range []struct{ url, want string }{
		{base + "&region=EU", "project="},
		{base + "&project=p1", "region="},
	} {
		_, err := backupstore.CreateBucket(ctx, tc.url, nil)
		if !errors.Is(err, backupstore.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want ErrInvalidConfig naming %s", tc.url, err, tc.want)
		}
	}
	if len(got) != 3 {
		t.Errorf("%d inserts, want 3: a refused call sends none", len(got))
	}
}
