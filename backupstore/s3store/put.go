package s3store

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/url"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/groundskeeper-io/groundskeeper/backupstore/internal/driver"
)

var _ driver.Putter = (*remover)(nil)

// partSize is the size of a multipart upload's parts.
const partSize = 8 << 20

// singleMax is the largest object written with one PutObject: a multipart
// upload costs at least three requests more.
const singleMax = 16 << 20

// partsInFlight bounds the parts of one object uploaded at once.
const partsInFlight = 4

// streamMax is the largest object of known MD5 streamed in one PutObject,
// straight from its body: above it, parts in flight upload one large object
// faster than one stream. A variable for the tests.
var streamMax int64 = 256 << 20

// buffers hold objects and parts while they are sent, shared by every
// Put: one list per power of two from 64 KiB to singleMax, so that a small
// object does not hold a part's worth of memory.
var buffers = &bufferPool{}

// bufferPool keeps the buffers of finished writes for the next ones. Unlike
// a sync.Pool, which every garbage collection empties (a copy of large
// objects then allocates most of its buffers again), it keeps them while
// writes go on, up to bufferPoolMax bytes, and drops them all once no
// write has taken or returned one for bufferPoolIdle.
type bufferPool struct {
	mu    sync.Mutex
	free  [9][]*[]byte // 64 KiB << i
	bytes int64        // in free
	idle  *time.Timer
}

const (
	bufferPoolMax  = 256 << 20
	bufferPoolIdle = 30 * time.Second
)

// get returns a buffer of at least n bytes, and put takes it back.
func (p *bufferPool) get(n int64) *[]byte {
	i := 0
	for int64(64<<10)<<i < n {
		i++
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.touch()
	if k := len(p.free[i]); k > 0 {
		b := p.free[i][k-1]
		p.free[i] = p.free[i][:k-1]
		p.bytes -= int64(cap(*b))
		return b
	}
	b := make([]byte, 64<<10<<i)
	return &b
}

func (p *bufferPool) put(b *[]byte) {
	i := 0
	for 64<<10<<i < cap(*b) {
		i++
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.touch()
	if p.bytes+int64(cap(*b)) > bufferPoolMax {
		return
	}
	p.free[i] = append(p.free[i], b)
	p.bytes += int64(cap(*b))
}

// touch (p.mu held) puts off the drop of the free buffers.
func (p *bufferPool) touch() {
	if p.idle == nil {
		p.idle = time.AfterFunc(bufferPoolIdle, p.drop)
		return
	}
	p.idle.Reset(bufferPoolIdle)
}

// drop lets the garbage collector have every free buffer.
func (p *bufferPool) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free = [9][]*[]byte{}
	p.bytes = 0
}

// errSize is a body longer or shorter than its listed size.
var errSize = errors.New("source changed while copying: its size is not the listed one")

func (r *remover) Put(ctx context.Context, raw string, body io.Reader, size int64, contentType string, sum []byte, metadata map[string]string) (bool, error) {
	bucket := r.bucket.Load()
	if bucket == nil {
		return false, nil
	}
	md := make(map[string]string, len(metadata))
	for k, v := range metadata {
		md[k] = url.PathEscape(v) // as gocloud's s3blob writes, and reads back
	}
	switch {
	case sum != nil && size > 0 && size <= streamMax:
		return true, r.putStream(ctx, bucket, raw, body, size, contentType, sum, md)
	case size <= singleMax:
		return true, r.putOne(ctx, bucket, raw, body, size, contentType, sum, md)
	}
	return true, r.putParts(ctx, bucket, raw, body, size, contentType, sum, md)
}

// readExactly reads n bytes of body into b and checks that body ends there.
func readExactly(body io.Reader, b []byte) error {
	if _, err := io.ReadFull(body, b); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return errSize
		}
		return err
	}
	var one [1]byte
	if n, err := body.Read(one[:]); n > 0 || (err != nil && err != io.EOF) {
		if err != nil && err != io.EOF {
			return err
		}
		return errSize
	}
	return nil
}

// putStream writes an object of known MD5 in one PutObject that reads body
// as it sends it: no buffer, and no hash computed here. The store checks
// the bytes against Content-MD5, a signed header, and refuses other bytes
// (the payload itself is sent unsigned, as its MD5 already binds it). A
// body of another size never completes the request: exactBody withholds
// the last bytes when more follow them, and a short body ends the request
// before its Content-Length. S3 stores an object only from a complete
// request whose MD5 matched, so nothing is written at raw.
func (r *remover) putStream(ctx context.Context, bucket *string, raw string, body io.Reader, size int64, contentType string, sum []byte, md map[string]string) error {
	in := &s3.PutObjectInput{Bucket: bucket, Key: aws.String(raw), Body: &exactBody{r: body, left: size},
		ContentLength: aws.Int64(size), ContentMD5: aws.String(base64.StdEncoding.EncodeToString(sum)), Metadata: md,
		IfNoneMatch: ifNoneMatch}
	if contentType != "" {
		in.ContentType = aws.String(contentType)
	}
	_, err := r.client.PutObject(ctx, in, func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.RetryMaxAttempts = 1 // a body read once cannot be sent again
	})
	var ee *exactError
	if errors.As(err, &ee) {
		return ee.err
	}
	return err
}

// exactBody reads left bytes from r, and fails instead of handing out the
// last of them when r has more, or ends before them.
type exactBody struct {
	r    io.Reader
	left int64
}

// exactError carries exactBody's error through the SDK.
type exactError struct{ err error }

func (e *exactError) Error() string { return e.err.Error() }

func (b *exactBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		return 0, b.end()
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	switch {
	case b.left == 0:
		if err := b.end(); err != io.EOF {
			return 0, err // the last bytes are withheld
		}
		return n, nil
	case err == io.EOF:
		return n, &exactError{errSize}
	case err != nil:
		return n, &exactError{err}
	}
	return n, nil
}

// end returns io.EOF when r ends after the bytes read, and an exactError
// when it has more or fails.
func (b *exactBody) end() error {
	var one [1]byte
	for {
		m, err := b.r.Read(one[:])
		switch {
		case m > 0:
			return &exactError{errSize}
		case err == io.EOF:
			return io.EOF
		case err != nil:
			return &exactError{err}
		}
	}
}

func (r *remover) putOne(ctx context.Context, bucket *string, raw string, body io.Reader, size int64, contentType string, sum []byte, md map[string]string) error {
	buf := buffers.get(size)
	defer buffers.put(buf)
	b := (*buf)[:size]
	if err := readExactly(body, b); err != nil {
		return err
	}
	in := &s3.PutObjectInput{Bucket: bucket, Key: aws.String(raw), Body: bytes.NewReader(b),
		ContentLength: aws.Int64(size), Metadata: md, IfNoneMatch: ifNoneMatch}
	if contentType != "" {
		in.ContentType = aws.String(contentType)
	}
	if sum != nil {
		in.ContentMD5 = aws.String(base64.StdEncoding.EncodeToString(sum))
	}
	_, err := r.client.PutObject(ctx, in)
	return err
}

// putParts streams body in parts of partSize, partsInFlight at a time, and
// completes the upload only when body had size bytes of MD5 sum (when
// given); otherwise it aborts it.
func (r *remover) putParts(ctx context.Context, bucket *string, raw string, body io.Reader, size int64, contentType string, sum []byte, md map[string]string) (err error) {
	in := &s3.CreateMultipartUploadInput{Bucket: bucket, Key: aws.String(raw), Metadata: md}
	if contentType != "" {
		in.ContentType = aws.String(contentType)
	}
	up, err := r.client.CreateMultipartUpload(ctx, in)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer func() {
		if err != nil {
			_, _ = r.client.AbortMultipartUpload(context.WithoutCancel(ctx), &s3.AbortMultipartUploadInput{
				Bucket: bucket, Key: aws.String(raw), UploadId: up.UploadId})
		}
	}()
	n := (size + partSize - 1) / partSize
	parts := make([]s3types.CompletedPart, n)
	h := md5.New()
	sem := make(chan struct{}, partsInFlight)
	var wg sync.WaitGroup
	for i := int64(0); i < n && ctx.Err() == nil; i++ {
		length := min(partSize, size-i*partSize)
		buf := buffers.get(partSize)
		b := (*buf)[:length]
		var rerr error
		if i == n-1 {
			rerr = readExactly(body, b)
		} else if _, rerr = io.ReadFull(body, b); errors.Is(rerr, io.ErrUnexpectedEOF) || errors.Is(rerr, io.EOF) {
			rerr = errSize
		}
		if rerr != nil {
			buffers.put(buf)
			cancel(rerr)
			break
		}
		h.Write(b)
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			buffers.put(buf)
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func(i int64) {
			defer func() { buffers.put(buf); <-sem; wg.Done() }()
			num := int32(i + 1)
			out, err := r.client.UploadPart(ctx, &s3.UploadPartInput{Bucket: bucket, Key: aws.String(raw), UploadId: up.UploadId,
				PartNumber: aws.Int32(num), Body: bytes.NewReader(b), ContentLength: aws.Int64(length)})
			if err != nil {
				cancel(err)
				return
			}
			parts[i] = s3types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)}
		}(i)
	}
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	if sum != nil && !bytes.Equal(h.Sum(nil), sum) {
		return fmt.Errorf("source changed while copying: MD5 %x, listed %x", h.Sum(nil), sum)
	}
	_, err = r.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: bucket, Key: aws.String(raw),
		UploadId: up.UploadId, MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts}, IfNoneMatch: ifNoneMatch})
	return err
}

// ifNoneMatch makes a write conditional on the key not existing
// (driver.Putter never writes over an object): S3 answers 412 Precondition
// Failed where one does.
var ifNoneMatch = aws.String("*")
