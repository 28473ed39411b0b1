package s3store

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"gocloud.dev/blob"
	"gocloud.dev/gcerrors"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
)

// TestNotFoundOnlyForMissingObjects feeds the real S3 driver error responses
// (the wire format of S3's REST API) and checks which of them driver.IsNotFound
// reads as a missing object (backupstore's classification, to which this
// package gives S3's codes). The request IDs contain "301", which gocloud's
// s3blob alone reports as NotFound whatever the error is: an access-denied
// object read as missing would be skipped by a copy and counted as gone by
// a delete.
func TestNotFoundOnlyForMissingObjects(t *testing.T) {
	type reply struct {
		status int
		code   string // S3 error code in the XML body; "" for none
	}
	cases := []struct {
		name  string
		reply reply
		want  bool
	}{
		{"NoSuchKey", reply{404, "NoSuchKey"}, true},
		{"NoSuchBucket", reply{404, "NoSuchBucket"}, true},
		{"404 without a body", reply{404, ""}, true},
		{"AccessDenied", reply{403, "AccessDenied"}, false},
		{"InvalidAccessKeyId", reply{403, "InvalidAccessKeyId"}, false},
		{"InternalError", reply{500, "InternalError"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("x-amz-request-id", "3010301030103010")
				w.Header().Set("x-amz-id-2", "id-301")
				if tc.reply.code == "" || r.Method == http.MethodHead {
					w.WriteHeader(tc.reply.status)
					return
				}
				w.Header().Set("Content-Type", "application/xml")
				w.WriteHeader(tc.reply.status)
				fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>%s</Code><Message>reply 301</Message><Key>backups/a</Key><RequestId>3010301030103010</RequestId></Error>`, tc.reply.code)
			}))
			defer srv.Close()

			ctx := context.Background()
			creds := &backupstore.Credentials{AccessKeyID: "id", SecretAccessKey: "secret", Region: "us-east-1", Endpoint: srv.URL, S3PathStyle: true}
			b, err := backupstore.OpenBucket(ctx, "s3://backups?disable_https=true", creds)
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			_, err = b.ReadAll(ctx, "backups/a")
			if err == nil {
				t.Fatal("ReadAll succeeded against an error reply")
			}
			if got := driver.IsNotFound(err); got != tc.want {
				t.Errorf("IsNotFound(%v) = %v, want %v (gcerrors.Code says %v)", err, got, tc.want, gcerrors.Code(err))
			}
			// Retries must not give up on a server error taken for a
			// missing object.
			if tc.reply.status == 500 && !driver.IsTransient(ctx, err) {
				t.Errorf("IsTransient(%v) = false for a 500", err)
			}
		})
	}
}

// TestLostConditionalWriteIsExists feeds the real S3 driver the reply a
// conditional write (If-None-Match) gets when the object is there, with
// request and host IDs that contain "301". gocloud's s3blob reports that
// 412 as NotFound; a writer that read it so would take a lost race for a
// store error (a CI run failed so: the host ID was …a4c30168…). The
// refusal must read as one, and WriteMarker's error must carry the
// FailedPrecondition its doc promises.
func TestLostConditionalWriteIsExists(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("x-amz-request-id", "18EC49885B7C7301")
		w.Header().Set("x-amz-id-2", "a1a4c30168db24f55d1522b327aba5bf")
		if r.Method != http.MethodPut {
			w.WriteHeader(http.StatusNotImplemented)
			return
		}
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusPreconditionFailed)
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?>
<Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message><Key>marker</Key><RequestId>18EC49885B7C7301</RequestId></Error>`)
	}))
	defer srv.Close()

	ctx := context.Background()
	creds := &backupstore.Credentials{AccessKeyID: "id", SecretAccessKey: "secret", Region: "us-east-1", Endpoint: srv.URL, S3PathStyle: true}
	b, err := backupstore.OpenBucket(ctx, "s3://backups?disable_https=true", creds)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	err = b.WriteAll(ctx, "marker", []byte("x"), &blob.WriterOptions{IfNotExist: true})
	if err == nil {
		t.Fatal("WriteAll succeeded against a 412")
	}
	if !driver.IsExists(err) {
		t.Errorf("IsExists(%v) = false for a 412 (gcerrors.Code says %v)", err, gcerrors.Code(err))
	}
	if driver.IsNotFound(err) {
		t.Errorf("IsNotFound(%v) = true for a 412", err)
	}

	err = backupstore.WriteMarker(ctx, b, "marker", "uid-1", []byte("x"))
	if code := gcerrors.Code(err); code != gcerrors.FailedPrecondition {
		t.Errorf("WriteMarker against a 412: %v, code %v; want FailedPrecondition", err, code)
	}
}
