package locking

import (
	"bytes"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/groundskeeper-io/groundskeeper/internal/tuple"
)

var t0 = time.Unix(1700000000, 0)

func rec(holder string, start, end time.Time) *record {
	return &record{holder: holder, start: start.Unix(), end: end.Unix()}
}

func TestDecideTake(t *testing.T) {
	tenMin := policy{duration: 10 * time.Minute}
	cases := []struct {
		name    string
		state   takeState
		now     time.Time
		policy  policy
		want    takeDecision
		wantErr error
		retry   time.Duration
	}{
		{
			name:  "free lock, ten-minute duration",
			state: takeState{self: "a"},
			now:   t0, policy: tenMin,
			want: takeDecision{write: record{"a", t0.Unix(), t0.Unix() + 600}, outcome: OutcomeTaken},
		},
		{
			name:  "free lock, sub-second now is truncated like the operator's Unix()",
			state: takeState{self: "a"},
			now:   t0.Add(999 * time.Millisecond), policy: tenMin,
			want: takeDecision{write: record{"a", t0.Unix(), t0.Unix() + 600}, outcome: OutcomeTaken},
		},
		{
			name:  "ours, 3 minutes in: extend to now+10m, keep start",
			state: takeState{self: "a", current: rec("a", t0, t0.Add(10*time.Minute))},
			now:   t0.Add(3 * time.Minute), policy: tenMin,
			want: takeDecision{write: record{"a", t0.Unix(), t0.Unix() + 780}, outcome: OutcomeExtended},
		},
		{
			name:  "ours, at the end second: still live, extend",
			state: takeState{self: "a", current: rec("a", t0, t0.Add(10*time.Minute))},
			now:   t0.Add(10*time.Minute + 999*time.Millisecond), policy: tenMin,
			want: takeDecision{write: record{"a", t0.Unix(), t0.Unix() + 1200}, outcome: OutcomeExtended},
		},
		{
			name:  "ours, one second past the end: taken afresh",
			state: takeState{self: "a", current: rec("a", t0, t0.Add(10*time.Minute))},
			now:   t0.Add(10*time.Minute + time.Second), policy: tenMin,
			want: takeDecision{write: record{"a", t0.Unix() + 601, t0.Unix() + 1201}, outcome: OutcomeTaken},
		},
		{
			name:  "theirs, live: refused, retry one second after the end second",
			state: takeState{self: "a", current: rec("b", t0, t0.Add(10*time.Minute))},
			now:   t0.Add(time.Minute + 500*time.Millisecond), policy: tenMin,
			wantErr: ErrLocked, retry: 9*time.Minute + 500*time.Millisecond,
		},
		{
			name:  "theirs, expired: taken over with our own start",
			state: takeState{self: "a", current: rec("b", t0, t0.Add(10*time.Minute))},
			now:   t0.Add(11 * time.Minute), policy: tenMin,
			want: takeDecision{write: record{"a", t0.Unix() + 660, t0.Unix() + 1260}, outcome: OutcomeTakenOver, previous: "b"},
		},
		{
			name:  "theirs, expired by 1s but within 30s skew tolerance: refused",
			state: takeState{self: "a", current: rec("b", t0, t0.Add(10*time.Minute))},
			now:   t0.Add(10*time.Minute + time.Second), policy: policy{duration: 10 * time.Minute, skew: 30 * time.Second},
			wantErr: ErrLocked, retry: 30 * time.Second,
		},
		{
			name:  "theirs, expired beyond skew tolerance: taken over",
			state: takeState{self: "a", current: rec("b", t0, t0.Add(10*time.Minute))},
			now:   t0.Add(10*time.Minute + 31*time.Second), policy: policy{duration: 10 * time.Minute, skew: 30 * time.Second},
			want: takeDecision{write: record{"a", t0.Unix() + 631, t0.Unix() + 1231}, outcome: OutcomeTakenOver, previous: "b"},
		},
		{
			name:  "theirs, live, holder denied: taken over",
			state: takeState{self: "a", current: rec("b", t0, t0.Add(10*time.Minute)), holderDenied: true},
			now:   t0.Add(time.Minute), policy: tenMin,
			want: takeDecision{write: record{"a", t0.Unix() + 60, t0.Unix() + 660}, outcome: OutcomeTakenOver, previous: "b"},
		},
		{
			name:  "we are denied, lock free",
			state: takeState{self: "a", selfDenied: true},
			now:   t0, policy: tenMin,
			wantErr: ErrDenied,
		},
		{
			name:  "we are denied and hold a live lock",
			state: takeState{self: "a", selfDenied: true, current: rec("a", t0, t0.Add(10*time.Minute))},
			now:   t0.Add(time.Minute), policy: tenMin,
			wantErr: ErrDenied,
		},
		{
			name:  "theirs, end at the far future: refused with the longest retry",
			state: takeState{self: "a", current: &record{"b", 0, math.MaxInt64}},
			now:   t0, policy: tenMin,
			wantErr: ErrLocked, retry: math.MaxInt64,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := decideTake(c.state, c.now, c.policy)
			if c.wantErr != nil {
				if !errors.Is(got.err, c.wantErr) {
					t.Fatalf("err = %v, want %v", got.err, c.wantErr)
				}
				var held *HeldError
				if errors.As(got.err, &held) && held.RequeueAfter != c.retry {
					t.Fatalf("RequeueAfter = %s, want %s", held.RequeueAfter, c.retry)
				}
				return
			}
			if got.err != nil {
				t.Fatalf("err = %v", got.err)
			}
			if diff := cmp.Diff(c.want, got, cmp.AllowUnexported(takeDecision{}, record{})); diff != "" {
				t.Fatalf("decision (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecideRelease(t *testing.T) {
	cur := record{"a", t0.Unix(), t0.Unix() + 600}
	cases := []struct {
		name string
		self string
		now  time.Time
		ok   bool
	}{
		{"ours, live", "a", t0.Add(time.Minute), true},
		{"ours, at the start second", "a", t0, true},
		{"ours, at the end second", "a", t0.Add(10*time.Minute + 999*time.Millisecond), true},
		{"ours, one second past the end", "a", t0.Add(10*time.Minute + time.Second), false},
		{"ours, clock one second behind the start", "a", t0.Add(-time.Second), false},
		{"theirs", "b", t0.Add(time.Minute), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := decideRelease(c.self, cur, c.now)
			if c.ok != (err == nil) {
				t.Fatalf("decideRelease = %v, want ok %v", err, c.ok)
			}
			if err != nil && !errors.Is(err, ErrNotHeld) {
				t.Fatalf("error %v does not wrap ErrNotHeld", err)
			}
		})
	}
}

func TestRecordEncoding(t *testing.T) {
	// The FoundationDB operator's lock value for tuple{"dc1", 1700000000,
	// 1700000600}: 0x02 unicode string, 0x18 four-byte positive integers.
	want := []byte("\x02dc1\x00\x18\x65\x53\xf1\x00\x18\x65\x53\xf3\x58")
	got, err := encodeRecord(record{"dc1", 1700000000, 1700000600})
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("encodeRecord = %q, %v; want %q", got, err, want)
	}
	r, err := decodeRecord([]byte("k"), want)
	if err != nil || r != (record{"dc1", 1700000000, 1700000600}) {
		t.Fatalf("decodeRecord = %+v, %v", r, err)
	}
}

// FuzzDecodeRecord: the stored value is outside input. Decoding never panics,
// fails only with ErrCorrupt, and what it accepts re-encodes to a value with
// the same meaning.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte("\x02dc1\x00\x18\x65\x53\xf1\x00\x18\x65\x53\xf3\x58"))
	f.Add([]byte("\x02dc1\x00\x18\x65\x53\xf1\x00\x18\x65\x53\xf3\x58\x02x\x00"))
	f.Add([]byte("\x01dc1\x00\x14\x14"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, value []byte) {
		r, err := decodeRecord([]byte("key"), value)
		if err != nil {
			var corrupt *CorruptError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &corrupt) || !bytes.Equal(corrupt.Value, value) {
				t.Fatalf("decodeRecord(%x) = %v, want a *CorruptError carrying the value", value, err)
			}
			return
		}
		enc, err := encodeRecord(r)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", r, err)
		}
		// The accepted value starts with the canonical record; anything after
		// the third element is ignored.
		if !bytes.HasPrefix(value, enc) {
			t.Fatalf("decodeRecord(%x) = %+v, which encodes to %x", value, r, enc)
		}
		if _, err := tuple.Unpack(value[len(enc):]); err != nil {
			t.Fatalf("trailing bytes of an accepted value are not tuple elements: %v", err)
		}
	})
}
