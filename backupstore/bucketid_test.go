package backupstore_test

import (
	"errors"
	"testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore"
)

func TestParseURLIdentity(t *testing.T) {
	for _, tc := range []struct {
		name   string
		url    string
		want   backupstore.BucketID
		prefix string
	}{
		{"s3 on AWS", "s3://b", backupstore.BucketID{Scheme: "s3", Name: "b"}, ""},
		{"s3 with a region is the same bucket", "s3://b?region=eu-west-1", backupstore.BucketID{Scheme: "s3", Name: "b"}, ""},
		{"s3 at AWS's own endpoint is AWS", "s3://b?endpoint=https://s3.eu-west-1.amazonaws.com", backupstore.BucketID{Scheme: "s3", Name: "b"}, ""},
		{"s3 on MinIO, options and scheme left out", "s3://B?endpoint=HTTP://127.0.0.1:9000/&use_path_style=true&region=us-east-1&prefix=p/",
			backupstore.BucketID{Scheme: "s3", Endpoint: "127.0.0.1:9000", Name: "b"}, "p/"},
		{"gs with project and region", "gs://g?project=x&region=europe-west1", backupstore.BucketID{Scheme: "gs", Name: "g"}, ""},
		{"gs on an emulator", "gs://g?endpoint=http://127.0.0.1:4443&anonymous=true", backupstore.BucketID{Scheme: "gs", Endpoint: "127.0.0.1:4443", Name: "g"}, ""},
		{"azblob with an account", "azblob://c?storage_account=Acct&protocol=https", backupstore.BucketID{Scheme: "azblob", Endpoint: "acct", Name: "c"}, ""},
		{"azblob on the emulator", "azblob://c?storage_account=devstoreaccount1&localemu=true&domain=127.0.0.1:10000&protocol=http",
			backupstore.BucketID{Scheme: "azblob", Endpoint: "devstoreaccount1@127.0.0.1:10000", Name: "c"}, ""},
		{"file, cleaned", "file:///tmp/x/../b/?prefix=q/", backupstore.BucketID{Scheme: "file", Name: "/tmp/b"}, "q/"},
		{"mem", "mem://m/", backupstore.BucketID{Scheme: "mem", Name: "m"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := backupstore.ParseURL(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			if u.ID != tc.want || u.Prefix != tc.prefix || u.String() != tc.url {
				t.Errorf("ParseURL(%q) = %+v, prefix %q, %q; want %+v, prefix %q", tc.url, u.ID, u.Prefix, u.String(), tc.want, tc.prefix)
			}
		})
	}
}

func TestParseURLRefuses(t *testing.T) {
	for _, raw := range []string{"http://b", "s3://", "gs://?endpoint=x", "file://", "::"} {
		if _, err := backupstore.ParseURL(raw); !errors.Is(err, backupstore.ErrInvalidConfig) {
			t.Errorf("ParseURL(%q) = %v; want ErrInvalidConfig", raw, err)
		}
	}
}

func TestSameBucket(t *testing.T) {
	id := func(raw string) backupstore.URL {
		u, err := backupstore.ParseURL(raw)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"s3://b", "s3://b?region=eu-west-1", true},
		{"s3://b/", "s3://B?use_path_style=true", true},
		{"s3://b?endpoint=http://127.0.0.1:9000", "s3://b?endpoint=https://127.0.0.1:9000/", true},
		{"s3://b", "s3://b?endpoint=http://127.0.0.1:9000", false},
		{"s3://b?endpoint=http://127.0.0.1:9000", "s3://b?endpoint=http://127.0.0.1:9001", false},
		{"s3://b", "gs://b", false},
		{"s3://b", "s3://c", false},
		{"azblob://c", "azblob://c?storage_account=x", true},
		{"azblob://c?storage_account=y", "azblob://c?storage_account=x", false},
		{"file:///tmp/b", "file:///tmp/a/../b/", true},
	} {
		if got := backupstore.SameBucket(id(tc.a).ID, id(tc.b).ID); got != tc.same {
			t.Errorf("SameBucket(%q, %q) = %v; want %v", tc.a, tc.b, got, tc.same)
		}
	}
	for _, tc := range []struct {
		a, p, b, q string
		overlap    bool
	}{
		{"s3://b", "x/", "s3://b?region=eu", "x/y/", true},
		{"s3://b?prefix=x/", "y/", "s3://b", "x/", true},
		{"s3://b?prefix=x/", "y/", "s3://b", "x/z/", false},
		{"s3://b", "", "s3://b", "x/", true},
		{"s3://b", "a/", "s3://b", "ab/", false},
	} {
		if got := backupstore.Overlap(id(tc.a), tc.p, id(tc.b), tc.q); got != tc.overlap {
			t.Errorf("Overlap(%q %q, %q %q) = %v; want %v", tc.a, tc.p, tc.b, tc.q, got, tc.overlap)
		}
	}
}

func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"s3://b?endpoint=http://h:1&prefix=p/", "azblob://c?storage_account=a", "file:///x", "mem://"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := backupstore.ParseURL(raw)
		if err != nil {
			return
		}
		again, err := backupstore.ParseURL(u.String())
		if err != nil || again.ID != u.ID || again.Prefix != u.Prefix {
			t.Fatalf("ParseURL(%q) = %+v; again %+v, %v", raw, u, again, err)
		}
		if !backupstore.SameBucket(u.ID, u.ID) {
			t.Fatalf("%+v is not the same bucket as itself", u.ID)
		}
	})
}
