package opstask_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/groundskeeper-io/groundskeeper/opstask"
)

// snapshotConfig is a config type as an operator declares one.
type snapshotConfig struct {
	Type    string   `json:"type"`
	Timeout *int32   `json:"timeoutSeconds,omitempty"`
	Store   *store   `json:"store,omitempty"`
	Tags    []string `json:"tags,omitempty"`
}

type store struct {
	Provider string `json:"provider"`
	Prefix   string `json:"prefix,omitempty"`
}

func taskWith(config map[string]string) *opstask.Task {
	t := &opstask.Task{Namespace: "ns", Name: "nightly", Spec: opstask.Spec{Config: map[string]json.RawMessage{}}}
	for k, v := range config {
		t.Spec.Config[k] = json.RawMessage(v)
	}
	return t
}

func TestDecodeConfig(t *testing.T) {
	ten := int32(10)
	for _, tc := range []struct {
		name    string
		config  map[string]string
		want    *snapshotConfig
		wantErr []string // substrings of the error, which must wrap ErrInvalidSpec
	}{
		{"every field set", map[string]string{"snapshot": `{"type":"full","timeoutSeconds":10,"store":{"provider":"S3","prefix":"p/"},"tags":["a"]}`},
			&snapshotConfig{Type: "full", Timeout: &ten, Store: &store{Provider: "S3", Prefix: "p/"}, Tags: []string{"a"}}, nil},
		{"optional fields left out", map[string]string{"snapshot": `{"type":"delta"}`}, &snapshotConfig{Type: "delta"}, nil},
		{"empty object", map[string]string{"snapshot": `{}`}, &snapshotConfig{}, nil},
		{"unknown field", map[string]string{"snapshot": `{"type":"full","tyep":"delta"}`}, nil,
			[]string{"task ns/nightly", "spec.config.snapshot", `unknown field "tyep"`}},
		{"unknown nested field", map[string]string{"snapshot": `{"store":{"provider":"S3","bucket":"b"}}`}, nil,
			[]string{"spec.config.snapshot", `unknown field "store.bucket"`}},
		{"field in the wrong case", map[string]string{"snapshot": `{"Type":"full"}`}, nil, []string{`unknown field "Type"`}},
		{"field given twice", map[string]string{"snapshot": `{"type":"full","type":"delta"}`}, nil, []string{`duplicate field "type"`}},
		{"several unknown fields, all named", map[string]string{"snapshot": `{"a":1,"b":2}`}, nil, []string{`unknown field "a"`, `unknown field "b"`}},
		{"wrong type", map[string]string{"snapshot": `{"timeoutSeconds":"ten"}`}, nil, []string{"spec.config.snapshot", "timeoutSeconds"}},
		{"number out of range", map[string]string{"snapshot": `{"timeoutSeconds":1e12}`}, nil, []string{"timeoutSeconds"}},
		{"not an object", map[string]string{"snapshot": `[1]`}, nil, []string{"spec.config.snapshot"}},
		{"trailing data", map[string]string{"snapshot": `{} {}`}, nil, []string{"spec.config.snapshot"}},
		{"another kind's member", map[string]string{"compaction": `{}`}, nil,
			[]string{"spec.config.compaction is set, want spec.config.snapshot"}},
		{"no member", map[string]string{}, nil, []string{"task ns/nightly of kind snapshot", "no member set"}},
		{"two members", map[string]string{"snapshot": `{}`, "compaction": `{}`}, nil, []string{"kind snapshot", "2 members set"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := opstask.DecodeConfig[snapshotConfig](taskWith(tc.config), "snapshot")
			if tc.wantErr == nil {
				if err != nil || !reflect.DeepEqual(got, tc.want) {
					t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
				}
				return
			}
			if got != nil || !errors.Is(err, opstask.ErrInvalidSpec) {
				t.Fatalf("got %+v, %v; want an error wrapping ErrInvalidSpec", got, err)
			}
			var ce *opstask.CodedError
			if !errors.As(err, &ce) || ce.Code != opstask.CodeInvalidSpec {
				t.Errorf("error %v has no code InvalidSpec", err)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// FuzzDecodeConfig feeds arbitrary configs, as a person with kubectl or a
// store without schema validation might write them: DecodeConfig returns a
// config or an InvalidSpec error, never panics, and what it accepts
// survives a round trip unchanged.
func FuzzDecodeConfig(f *testing.F) {
	for _, s := range []string{
		`{"type":"full","timeoutSeconds":10,"store":{"provider":"S3","prefix":"p/"},"tags":["a"]}`,
		`{}`, `null`, `{"type":"full","type":"delta"}`, `{"store":{"x":1}}`, `{"Type":"x"}`, `[1]`, `"x"`, `{"timeoutSeconds":1e99}`, `{`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		task := taskWith(map[string]string{"snapshot": in})
		got, err := opstask.DecodeConfig[snapshotConfig](task, "snapshot")
		if err != nil {
			var ce *opstask.CodedError
			if got != nil || !errors.Is(err, opstask.ErrInvalidSpec) || !errors.As(err, &ce) || ce.Code != opstask.CodeInvalidSpec {
				t.Fatalf("%q: got %+v, %v; want nil and an InvalidSpec error", in, got, err)
			}
			return
		}
		out, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("%q decoded to %+v, which does not encode: %v", in, got, err)
		}
		// Compared as encodings: an empty list and a missing one are the
		// same config.
		again, err := opstask.DecodeConfig[snapshotConfig](taskWith(map[string]string{"snapshot": string(out)}), "snapshot")
		if err != nil {
			t.Fatalf("%q decoded to %+v; its encoding %s does not decode: %v", in, got, out, err)
		}
		if out2, _ := json.Marshal(again); string(out2) != string(out) {
			t.Fatalf("%q decoded to %s, which decodes to %s", in, out, out2)
		}
	})
}
