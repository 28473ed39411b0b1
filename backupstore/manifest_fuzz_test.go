package backupstore

import (
	"encoding/json"
	"testing"
)

// FuzzLooksLikeManifest: looksLikeManifest reads objects of a store, which
// anyone with write access fills. It never panics; every manifest this
// package writes is recognised, whatever its entries; and what it
// recognises decodes as a Manifest.
func FuzzLooksLikeManifest(f *testing.F) {
	for _, m := range []Manifest{
		{},
		{SourcePrefix: "a/", TargetPrefix: "b/"},
		{SourcePrefix: "a/", TargetPrefix: "b/", Entries: []ManifestEntry{{Key: "a/1", Status: StatusCopied}}},
	} {
		data, err := json.Marshal(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"sourcePrefix":"a/","targetPrefix":"b/","entries":[],"x":1}`))
	f.Add([]byte(`{"sourcePrefix":"a/","targetPrefix":"b/","entries":{}}`))
	f.Add([]byte(`{"snapshot":"full","revision":12}`))
	f.Add([]byte(`[1,2,3]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if looksLikeManifest(data) {
			var m Manifest
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatalf("recognised as a manifest but does not decode as one: %q: %v", data, err)
			}
			again, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if !looksLikeManifest(again) {
				t.Fatalf("the manifest decoded from %q, written again, is not recognised: %q", data, again)
			}
		}
	})
}

// Every manifest the package writes is recognised, an empty one included.
func TestLooksLikeManifestRecognisesEveryWrittenManifest(t *testing.T) {
	for _, m := range []Manifest{{}, {SourcePrefix: "a/", TargetPrefix: "b/"},
		{SourcePrefix: "a/", TargetPrefix: "b/", Entries: []ManifestEntry{{Key: "a/1", Status: StatusCopied}}}} {
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if !looksLikeManifest(data) {
			t.Errorf("manifest %s not recognised", data)
		}
	}
	for _, data := range []string{`{"snapshot":"full"}`, `{"sourcePrefix":"a/","targetPrefix":"b/","entries":[],"x":1}`, `null`, ``} {
		if looksLikeManifest([]byte(data)) {
			t.Errorf("%q recognised as a manifest", data)
		}
	}
}
