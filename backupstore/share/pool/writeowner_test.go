package pool

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	_ "github.com/groundskeeper-io/groundskeeper/backupstore/s3store"
)

// TestWriteOwnerLosesARaceOnS3 is two replicas provisioning one bucket at
// once, as the loser sees it on S3: its conditional write of the owner
// marker gets 412 Precondition Failed, whose request and host IDs contain
// "301" (gocloud's s3blob then reports NotFound), and the marker is there
// when read. writeOwner returns the winner's marker, not an error.
func TestWriteOwnerLosesARaceOnS3(t *testing.T) {
	winner := bucketOwner{Installation: "i", Pool: "p", Bucket: "ns/p-5", UID: "uid-5"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-amz-request-id", "18EC49885B7C7301")
		w.Header().Set("x-amz-id-2", "a1a4c30168db24f55d1522b327aba5bf")
		switch r.Method {
		case http.MethodPut:
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusPreconditionFailed)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message></Error>`)
		case http.MethodGet:
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(winner)
		default:
			w.WriteHeader(http.StatusNotImplemented)
		}
	}))
	defer srv.Close()

	ctx := context.Background()
	creds := &backupstore.Credentials{AccessKeyID: "id", SecretAccessKey: "secret", Region: "us-east-1", Endpoint: srv.URL, S3PathStyle: true}
	store, err := backupstore.OpenBucket(ctx, "s3://p-5?disable_https=true", creds)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	have, err := writeOwner(ctx, store, bucketOwner{Installation: "i", Pool: "p", Bucket: "ns/p-5", UID: "uid-5"})
	if err != nil {
		t.Fatalf("writeOwner that lost the race: %v; want the winner's marker", err)
	}
	if *have != winner {
		t.Errorf("writeOwner returned %+v; want the winner's %+v", *have, winner)
	}
}
