package s3store

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/groundskeeper-io/groundskeeper/testenv"
)

// TestPutWritesOnlyWhatWasListed writes objects on MinIO through Put, in
// each of its ways (a stream, one PutObject, a multipart upload): a body
// shorter or longer than its listed size, or of another MD5, fails the
// write and leaves nothing at the key (no object, no unfinished upload);
// the listed body is written byte for byte.
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

	// The three ways Put writes: a stream when the MD5 is known, one
	// buffered PutObject, and a multipart upload (with and without an MD5,
	// streamMax lowered for the first).
	ways := []struct {
		name      string
		size      int64
		knownMD5  bool
		streamMax int64
	}{
		{"stream", 100 << 10, true, streamMax},
		{"stream, empty", 0, true, streamMax},
		{"one PutObject", 100 << 10, false, streamMax},
		{"multipart", singleMax + partSize + 5, false, streamMax},
		{"multipart with an MD5", singleMax + partSize + 5, true, singleMax},
	}
	defer func(v int64) { streamMax = v }(streamMax)
	for _, way := range ways {
		streamMax = way.streamMax
		size := way.size
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(i * 7)
		}
		sum := md5.Sum(data)
		other := md5.Sum(append(data, 0))
		listed := sum[:]
		if !way.knownMD5 {
			listed = nil
		}
		cases := []struct {
			name string
			body io.Reader
			sum  []byte
			want bool
		}{
			{"a longer body", io.MultiReader(bytes.NewReader(data), bytes.NewReader([]byte{1})), listed, false},
			{"the listed body", bytes.NewReader(data), listed, true},
		}
		if size > 0 {
			cases = append(cases, struct {
				name string
				body io.Reader
				sum  []byte
				want bool
			}{"a shorter body", bytes.NewReader(data[:size-1]), listed, false})
		}
		if way.knownMD5 {
			cases = append(cases, struct {
				name string
				body io.Reader
				sum  []byte
				want bool
			}{"another MD5", bytes.NewReader(data), other[:], false})
		}
		for _, tc := range cases {
			key := "put/" + way.name + "/" + tc.name
			ok, err := r.Put(ctx, key, tc.body, size, "application/octet-stream", tc.sum, map[string]string{"source": "a b"})
			if !ok {
				t.Fatalf("%s, %s: Put could not write (no bucket)", way.name, tc.name)
			}
			got, getErr := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(key)})
			if !tc.want {
				if err == nil {
					t.Errorf("%s, %s: Put succeeded, want an error", way.name, tc.name)
				}
				if getErr == nil {
					got.Body.Close()
					t.Errorf("%s, %s: an object was written at %q", way.name, tc.name, key)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s, %s: Put: %v", way.name, tc.name, err)
			}
			if getErr != nil {
				t.Fatalf("%s, %s: read back: %v", way.name, tc.name, getErr)
			}
			back, err := io.ReadAll(got.Body)
			got.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(back, data) {
				t.Errorf("%s: read back %d bytes, not the %d written", way.name, len(back), len(data))
			}
			if v := got.Metadata["source"]; v != "a%20b" {
				t.Errorf("%s: metadata source %q, want the escaped %q", way.name, v, "a%20b")
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

// TestBufferPool: a buffer returned is handed out again (a garbage
// collection in between keeps it), the pool keeps at most bufferPoolMax
// bytes, and dropping it empties it.
func TestBufferPool(t *testing.T) {
	p := &bufferPool{}
	b := p.get(100 << 10)
	if cap(*b) != 128<<10 {
		t.Fatalf("a buffer for 100 KiB has %d bytes, want 128 KiB", cap(*b))
	}
	p.put(b)
	runtime.GC()
	if again := p.get(70 << 10); again != b {
		t.Error("the returned buffer was not handed out again after a garbage collection")
	}
	var big []*[]byte
	for range bufferPoolMax/singleMax + 2 {
		big = append(big, p.get(singleMax))
	}
	for _, b := range big {
		p.put(b)
	}
	if p.bytes > bufferPoolMax {
		t.Errorf("the pool keeps %d bytes, more than %d", p.bytes, bufferPoolMax)
	}
	p.drop()
	if p.bytes != 0 || len(p.free[8]) != 0 {
		t.Errorf("after drop: %d bytes, %d large buffers kept; want none", p.bytes, len(p.free[8]))
	}
}
