package s3store

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// An s3:// bucket opened without credentials (the environment's, as with
// an instance role) reads an object stored without an additional checksum
// without the SDK's warning for each read, and still writes and reads.
func TestAmbientReadsWithoutAChecksumWarning(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MinIO")
	}
	s := testenv.S3(t)
	ctx := context.Background()
	var direct *s3.Client
	if !s.Open(t).As(&direct) {
		t.Fatal("bucket is not an s3blob bucket")
	}
	// Written by a client that sends a checksum only when required: the
	// store keeps none, and answers reads without one.
	plain := s3.New(direct.Options(), func(o *s3.Options) {
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
	})
	if _, err := plain.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String("plain"), Body: strings.NewReader("no checksum")}); err != nil {
		t.Fatal(err)
	}

	// The SDK's default logger writes to the os.Stderr of when the client
	// is made.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := os.Stderr
	os.Stderr = w
	b, err := backupstore.OpenBucket(ctx, s.URL, nil)
	os.Stderr = stderr
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for range 2 {
		got, err := b.ReadAll(ctx, "plain")
		if err != nil || string(got) != "no checksum" {
			t.Fatalf("read: %q, %v", got, err)
		}
	}
	if err := b.WriteAll(ctx, "written", []byte("x"), nil); err != nil {
		t.Fatalf("write through the ambient bucket: %v", err)
	}
	w.Close()
	logged, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(logged), "checksum") {
		t.Errorf("the SDK logged on reads:\n%s", logged)
	}
}
