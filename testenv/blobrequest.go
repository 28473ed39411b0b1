package testenv

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// The few requests testenv sends to the stores it starts (creating a
// bucket or a container) are signed here, so that a test that uses only
// Kubernetes does not link the stores' SDKs: a test that opens a store's
// bucket links its driver itself (see [BlobStore.Open]).

// s3request sends a request signed with AWS Signature Version 4 (the
// testenv credentials, region S3Region) to the MinIO server at endpoint,
// and fails unless it answers 2xx. query is already canonical (names
// sorted, "name=value" joined by "&").
func s3request(ctx context.Context, endpoint, method, path, query string, header http.Header, body []byte) error {
	return sendRetrying(func() (*http.Request, error) { return s3signed(ctx, endpoint, method, path, query, header, body) })
}

// s3signed is the request of s3request, signed now.
func s3signed(ctx context.Context, endpoint, method, path, query string, header http.Header, body []byte) (*http.Request, error) {
	url := "http://" + endpoint + path
	if query != "" {
		url += "?" + query
	}
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	now := time.Now().UTC()
	amzDate, day := now.Format("20060102T150405Z"), now.Format("20060102")
	payload := sha256.Sum256(body)
	req.Header.Set("X-Amz-Date", amzDate)
	req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(payload[:]))
	if len(body) > 0 {
		sum := md5.Sum(body)
		req.Header.Set("Content-Md5", base64.StdEncoding.EncodeToString(sum[:]))
	}
	names := []string{"host"}
	values := map[string]string{"host": req.URL.Host}
	for k, v := range req.Header {
		n := strings.ToLower(k)
		names = append(names, n)
		values[n] = strings.TrimSpace(strings.Join(v, ","))
	}
	slices.Sort(names)
	var canonHeaders strings.Builder
	for _, n := range names {
		canonHeaders.WriteString(n + ":" + values[n] + "\n")
	}
	signed := strings.Join(names, ";")
	canonical := strings.Join([]string{method, path, query, canonHeaders.String(), signed, hex.EncodeToString(payload[:])}, "\n")
	scope := day + "/" + S3Region + "/s3/aws4_request"
	hashed := sha256.Sum256([]byte(canonical))
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(hashed[:])
	key := []byte("AWS4" + S3SecretAccessKey)
	for _, part := range []string{day, S3Region, "s3", "aws4_request"} {
		key = hmacSHA256(key, part)
	}
	req.Header.Set("Authorization", fmt.Sprintf("AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s",
		S3AccessKeyID, scope, signed, hex.EncodeToString(hmacSHA256(key, toSign))))
	return req, nil
}

// azureRequest sends a request without a body, signed with the Azurite
// account's Shared Key, to the Azurite server at endpoint (path-style:
// path starts with the account), with the one query parameter name=value,
// and fails unless it answers 2xx.
func azureRequest(ctx context.Context, endpoint, method, path, name, value string) error {
	return sendRetrying(func() (*http.Request, error) { return azureSigned(ctx, endpoint, method, path, name, value) })
}

// azureSigned is the request of azureRequest, signed now.
func azureSigned(ctx context.Context, endpoint, method, path, name, value string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+endpoint+path+"?"+name+"="+value, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Ms-Date", time.Now().UTC().Format(http.TimeFormat))
	req.Header.Set("X-Ms-Version", "2021-12-02")
	// VERB, then Content-Encoding, -Language, -Length (empty for 0),
	// -MD5, -Type, Date, If-Modified-Since, If-Match, If-None-Match,
	// If-Unmodified-Since and Range, all empty here; then the x-ms-
	// headers and the resource.
	toSign := method + strings.Repeat("\n", 12) +
		"x-ms-date:" + req.Header.Get("X-Ms-Date") + "\n" +
		"x-ms-version:" + req.Header.Get("X-Ms-Version") + "\n" +
		"/" + AzureAccount + path + "\n" + strings.ToLower(name) + ":" + value
	key, err := base64.StdEncoding.DecodeString(AzureAccountKey)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "SharedKey "+AzureAccount+":"+base64.StdEncoding.EncodeToString(hmacSHA256(key, toSign)))
	return req, nil
}

func hmacSHA256(key []byte, data string) []byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	return h.Sum(nil)
}

// sendRetrying sends the request that newRequest signs, and fails unless
// the answer is 2xx, with the start of the answer's body. A connection
// error, 429 or 5xx is tried again (the request signed anew) for about
// 15 s, as the SDKs do: a store that just started, or restarted, answers
// 503 while it initializes (MinIO's XMinioServerNotInitialized).
func sendRetrying(newRequest func() (*http.Request, error)) error {
	var last error
	for i := range 12 {
		if i > 0 {
			time.Sleep(min(100*time.Millisecond<<i, 2*time.Second))
		}
		req, err := newRequest()
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			if req.Context().Err() != nil {
				return err
			}
			last = err
			continue
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			return nil
		}
		last = fmt.Errorf("%s %s: %s: %s", req.Method, req.URL, resp.Status, bytes.TrimSpace(msg))
		if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode/100 != 5 {
			return last
		}
	}
	return last
}
