package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// URLs
	_ "gocloud.dev/blob/memblob"  // mem:// URLs
)

// Well-known credentials of the emulators. The Azurite account and key are
// the documented development-storage defaults.
const (
	S3AccessKeyID     = "groundskeeper"
	S3SecretAccessKey = "groundskeeper-secret"
	S3Region          = "us-east-1"
	AzureAccount      = "devstoreaccount1"
	AzureAccountKey   = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// BlobStore is a bucket (container) that belongs to one test, on one of the
// object stores of the test environment.
type BlobStore struct {
	// Scheme is the gocloud URL scheme: s3, gs, azblob, file or mem.
	Scheme string
	// Bucket is the bucket or container name (a directory for file).
	Bucket string
	// URL opens the bucket with blob.OpenBucket. The environment variables
	// it needs (AWS_*, STORAGE_EMULATOR_HOST, AZURE_STORAGE_*) are set in
	// this process when the store starts.
	URL string
	// Endpoint is the store's HTTP endpoint, empty for file and mem.
	Endpoint string
}

// Open opens the bucket and closes it when the test ends. testenv
// registers the gocloud drivers of file:// and mem:// URLs only, so that a
// test that uses only Kubernetes links no store's SDK: a test that opens
// an s3://, gs:// or azblob:// bucket imports its driver, as the code
// under test does (backupstore/s3store, gcsstore or azurestore, or
// gocloud.dev/blob/s3blob, gcsblob or azureblob).
func (s *BlobStore) Open(t testing.TB) *blob.Bucket {
	t.Helper()
	b, err := blob.OpenBucket(context.Background(), s.URL)
	if err != nil {
		t.Fatalf("testenv: open %s: %v", s.URL, err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// BlobStores returns a fresh bucket on each object store that can hold
// backups: MinIO (S3), fake-gcs-server (GCS), Azurite (Azure Blob) and the
// local file system.
func BlobStores(t testing.TB) []*BlobStore {
	t.Helper()
	return []*BlobStore{S3(t), GCS(t), Azure(t), File(t)}
}

type blobServer struct {
	endpoint string // host:port
	proc     *process
}

var minioOnce, gcsOnce, azuriteOnce shared[*blobServer]

// S3 returns a fresh bucket on a shared MinIO server.
func S3(t testing.TB) *BlobStore {
	t.Helper()
	return S3With(t, BucketOptions{})
}

// BucketOptions say how S3With and GCSWith create their bucket.
type BucketOptions struct {
	// Versioning enables versioning on the bucket (object versioning on
	// GCS).
	Versioning bool
	// ObjectLock creates the bucket with S3 Object Lock enabled (which
	// also enables versioning), without a default retention. S3 only.
	ObjectLock bool
}

// S3With returns a fresh bucket on a shared MinIO server, versioned or
// with Object Lock as o says.
func S3With(t testing.TB, o BucketOptions) *BlobStore {
	t.Helper()
	skipInShortMode(t)
	srv, err := minioOnce.get(startMinIO)
	if err != nil {
		unavailable(t, err)
	}
	b, err := s3Bucket(srv.endpoint, uniqueName(t, 63), o)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return b
}

// s3Bucket creates a bucket on the MinIO server at endpoint, by plain
// signed requests (s3request): testenv links no store's SDK.
func s3Bucket(endpoint, name string, o BucketOptions) (*BlobStore, error) {
	ctx := context.Background()
	var header http.Header
	if o.ObjectLock {
		header = http.Header{"X-Amz-Bucket-Object-Lock-Enabled": {"true"}}
	}
	if err := s3request(ctx, endpoint, http.MethodPut, "/"+name, "", header, nil); err != nil {
		return nil, fmt.Errorf("create S3 bucket %s: %w", name, err)
	}
	if o.Versioning && !o.ObjectLock {
		body := []byte(`<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>Enabled</Status></VersioningConfiguration>`)
		if err := s3request(ctx, endpoint, http.MethodPut, "/"+name, "versioning=", nil, body); err != nil {
			return nil, fmt.Errorf("enable versioning on S3 bucket %s: %w", name, err)
		}
	}
	return &BlobStore{
		Scheme:   "s3",
		Bucket:   name,
		Endpoint: "http://" + endpoint,
		URL:      fmt.Sprintf("s3://%s?endpoint=http://%s&use_path_style=true&region=%s", name, endpoint, S3Region),
	}, nil
}

func startMinIO() (*blobServer, error) {
	consolePort, err := freePort()
	if err != nil {
		return nil, err
	}
	return startBlobServer(minIOSpec(consolePort))
}

// minIOSpec is MinIO in single-drive mode, its data in dir/data.
func minIOSpec(consolePort int) blobServerSpec {
	return blobServerSpec{
		name: "minio",
		env: []string{
			"MINIO_ROOT_USER=" + S3AccessKeyID,
			"MINIO_ROOT_PASSWORD=" + S3SecretAccessKey,
			"MINIO_BROWSER=off",
			"MINIO_UPDATE=off",
			// Lifecycle rules are applied by the scanner: a scan cycle
			// of a second, so that a due rule expires objects within
			// seconds.
			"MINIO_SCANNER_SPEED=fastest",
		},
		args: func(dir, endpoint string, _ int) []string {
			return []string{"server", "--quiet", "--address", endpoint,
				"--console-address", fmt.Sprintf("127.0.0.1:%d", consolePort), filepath.Join(dir, "data")}
		},
		ready: func(ctx context.Context, endpoint string) error {
			return httpOK(ctx, "http://"+endpoint+"/minio/health/ready")
		},
		urlEnv: map[string]string{
			"AWS_ACCESS_KEY_ID":     S3AccessKeyID,
			"AWS_SECRET_ACCESS_KEY": S3SecretAccessKey,
			"AWS_REGION":            S3Region,
		},
	}
}

// blobServerSpec says how to start one object store emulator.
type blobServerSpec struct {
	name  string   // binary, temporary directory and log name
	env   []string // extra environment of the process
	args  func(dir, endpoint string, port int) []string
	ready func(ctx context.Context, endpoint string) error
	// urlEnv are the variables gocloud's URL opener reads for this store;
	// the endpoint replaces "{endpoint}" in their values.
	urlEnv map[string]string
}

// startBlobServer starts an emulator on a fresh loopback port, waits until
// it answers, then sets the environment its gocloud URLs need. The variables
// are set once, when the store starts, and never changed afterwards, so
// that concurrently running tests see the same values.
func startBlobServer(spec blobServerSpec) (*blobServer, error) {
	path, err := binary(spec.name)
	if err != nil {
		return nil, err
	}
	dir, err := tempDir(spec.name)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	endpoint := fmt.Sprintf("127.0.0.1:%d", port)
	p, err := startProcess(spec.name, dir, spec.env, path, spec.args(dir, endpoint, port)...)
	if err != nil {
		return nil, err
	}
	if err := p.waitReady(60*time.Second, func(ctx context.Context) error { return spec.ready(ctx, endpoint) }); err != nil {
		return nil, err
	}
	for k, v := range spec.urlEnv {
		os.Setenv(k, strings.ReplaceAll(v, "{endpoint}", endpoint))
	}
	return &blobServer{endpoint: endpoint, proc: p}, nil
}

// GCS returns a fresh bucket on a shared fake-gcs-server.
func GCS(t testing.TB) *BlobStore {
	t.Helper()
	return GCSWith(t, BucketOptions{})
}

// GCSWith returns a fresh bucket on a shared fake-gcs-server, with object
// versioning as o says.
func GCSWith(t testing.TB, o BucketOptions) *BlobStore {
	t.Helper()
	if o.ObjectLock {
		t.Fatal("testenv: GCS buckets have no Object Lock")
	}
	skipInShortMode(t)
	srv, err := gcsOnce.get(startFakeGCS)
	if err != nil {
		unavailable(t, err)
	}
	b, err := gcsBucket(srv.endpoint, uniqueName(t, 63), o)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	b.URL = "gs://" + b.Bucket
	return b
}

// gcsBucket creates a bucket on the fake-gcs-server at endpoint. Its URL is
// left empty: gocloud finds a GCS emulator only through the process-wide
// STORAGE_EMULATOR_HOST.
func gcsBucket(endpoint, name string, o BucketOptions) (*BlobStore, error) {
	body := fmt.Sprintf(`{"name":%q,"versioning":{"enabled":%v}}`, name, o.Versioning)
	resp, err := http.Post("http://"+endpoint+"/storage/v1/b?project=groundskeeper", "application/json", bytes.NewBufferString(body))
	if err != nil {
		return nil, fmt.Errorf("create GCS bucket %s: %w", name, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("create GCS bucket %s: %s", name, resp.Status)
	}
	return &BlobStore{Scheme: "gs", Bucket: name, Endpoint: "http://" + endpoint}, nil
}

func startFakeGCS() (*blobServer, error) { return startBlobServer(fakeGCSSpec(false)) }

// fakeGCSSpec is fake-gcs-server, keeping its buckets in memory or, when
// persist is set, in files under dir/data.
func fakeGCSSpec(persist bool) blobServerSpec {
	return blobServerSpec{
		name: "fake-gcs-server",
		args: func(dir, endpoint string, port int) []string {
			backend := []string{"-backend", "memory"}
			if persist {
				backend = []string{"-backend", "filesystem", "-filesystem-root", filepath.Join(dir, "data")}
			}
			return append([]string{"-scheme", "http", "-host", "127.0.0.1", "-port", strconv.Itoa(port),
				"-public-host", endpoint, "-external-url", "http://" + endpoint, "-log-level", "warn"}, backend...)
		},
		ready: func(ctx context.Context, endpoint string) error {
			return httpOK(ctx, "http://"+endpoint+"/storage/v1/b")
		},
		urlEnv: map[string]string{"STORAGE_EMULATOR_HOST": "{endpoint}"},
	}
}

// Azure returns a fresh container on a shared Azurite blob server.
func Azure(t testing.TB) *BlobStore {
	t.Helper()
	skipInShortMode(t)
	srv, err := azuriteOnce.get(startAzurite)
	if err != nil {
		unavailable(t, err)
	}
	b, err := azureContainer(srv.endpoint, uniqueName(t, 63))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return b
}

// azureContainer creates a container on the Azurite server at endpoint, by
// a plain signed request (azureRequest): testenv links no store's SDK.
func azureContainer(endpoint, name string) (*BlobStore, error) {
	serviceURL := fmt.Sprintf("http://%s/%s", endpoint, AzureAccount)
	if err := azureRequest(context.Background(), endpoint, http.MethodPut, "/"+AzureAccount+"/"+name, "restype", "container"); err != nil {
		return nil, fmt.Errorf("create Azure container %s: %w", name, err)
	}
	return &BlobStore{
		Scheme:   "azblob",
		Bucket:   name,
		Endpoint: serviceURL,
		URL:      fmt.Sprintf("azblob://%s?localemu=true&domain=%s&protocol=http", name, endpoint),
	}, nil
}

func startAzurite() (*blobServer, error) { return startBlobServer(azuriteSpec(false)) }

// azuriteSpec is Azurite's blob service, keeping its data in memory or,
// when persist is set, in files under dir/data.
func azuriteSpec(persist bool) blobServerSpec {
	return blobServerSpec{
		name: "azurite-blob",
		args: func(dir, _ string, port int) []string {
			storage := []string{"--inMemoryPersistence"}
			if persist {
				storage = []string{"--location", filepath.Join(dir, "data")}
			}
			return append([]string{"--blobHost", "127.0.0.1", "--blobPort", strconv.Itoa(port),
				"--skipApiVersionCheck", "--loose", "--disableProductStyleUrl",
				// Telemetry would also hold a shutdown for ~20 s
				// trying to reach its collector.
				"--disableTelemetry"}, storage...)
		},
		ready: func(ctx context.Context, endpoint string) error {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", endpoint)
			if err != nil {
				return err
			}
			return c.Close()
		},
		urlEnv: map[string]string{
			"AZURE_STORAGE_ACCOUNT": AzureAccount,
			"AZURE_STORAGE_KEY":     AzureAccountKey,
		},
	}
}

// File returns a fresh directory bucket on the local file system.
func File(t testing.TB) *BlobStore {
	t.Helper()
	dir := t.TempDir()
	return &BlobStore{Scheme: "file", Bucket: dir, URL: "file://" + filepath.ToSlash(dir)}
}

// Mem returns a fresh in-memory bucket.
func Mem(t testing.TB) *BlobStore {
	t.Helper()
	return &BlobStore{Scheme: "mem", Bucket: uniqueName(t, 63), URL: "mem://"}
}
