package s3store

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// TestPutWritesOnlyWhatWasListed writes objects on MinIO through Put, one
// PutObject and a multipart upload: a body shorter or longer than its
// listed size, or of another MD5, fails the write and leaves nothing at the
// key (no object, no unfinished upload); the listed body is written byte
// for byte.
func TestPutWritesOnlyWhatWasListed(t *testing.T) {
	if testing.Short() {
		t.Skip("needs MinIO")
	}
	s := testenv.S3(t)
	var client *s3.Client
	if !s.Open(t).As(&client) {
		t.Fatal("bucket is not an s3blob bucket")
	}
	r := &remover{client: client}
	r.bucket.Store(aws.String(s.Bucket))
	ctx := context.Background()

	for _, size := range []int64{100 << 10, singleMax + partSize + 5} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i * 7)
		}
		sum := md5.Sum(data)
		other := md5.Sum(data[1:])
		cases := []struct {
			name string
			body io.Reader
			sum  []byte
			want bool
		}{
			{"a shorter body", bytes.NewReader(data[:size-1]), sum[:], false},
			{"a longer body", io.MultiReader(bytes.NewReader(data), bytes.NewReader([]byte{1})), sum[:], false},
			{"another MD5", bytes.NewReader(data), other[:], false},
			{"the listed body", bytes.NewReader(data), sum[:], true},
		}
		for _, tc := range cases {
			key := "put/" + tc.name
			ok, err := r.Put(ctx, key, tc.body, size, "application/octet-stream", tc.sum, map[string]string{"source": "a b"})
			if !ok {
				t.Fatalf("size %d, %s: Put could not write (no bucket)", size, tc.name)
			}
			got, getErr := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key)})
			if !tc.want {
				if err == nil {
					t.Errorf("size %d, %s: Put succeeded, want an error", size, tc.name)
				}
				if getErr == nil {
					got.Body.Close()
					t.Errorf("size %d, %s: an object was written at %q", size, tc.name, key)
				}
				continue
			}
			if err != nil {
				t.Fatalf("size %d, %s: Put: %v", size, tc.name, err)
			}
			if getErr != nil {
				t.Fatalf("size %d, %s: read back: %v", size, tc.name, getErr)
			}
			back, err := io.ReadAll(got.Body)
			got.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, data) {
				t.Errorf("size %d: read back %d bytes, not the %d written", size, len(back), len(data))
			}
			if v := got.Metadata["source"]; v != "a%20b" {
				t.Errorf("size %d: metadata source %q, want the escaped %q", size, v, "a%20b")
			}
		}
	}
	uploads, err := client.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(s.Bucket)})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(uploads.Uploads); n != 0 {
		t.Errorf("%d multipart uploads left unfinished, want 0 (a failed write aborts its upload)", n)
	}

	// A remover that has listed nothing knows no bucket: it reads nothing
	// and says so.
	body := &countingReader{}
	if ok, err := (&remover{client: client}).Put(ctx, "put/none", body, 1, "", nil, nil); ok || err != nil || body.n != 0 {
		t.Errorf("Put without a bucket: ok %v, err %v, %d reads; want false, nil, 0", ok, err, body.n)
	}
}

type countingReader struct{ n int }

func (c *countingReader) Read([]byte) (int, error) { c.n++; return 0, errors.New("read") }
