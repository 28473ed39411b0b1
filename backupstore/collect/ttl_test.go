package collect_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/groundskeeper-io/groundskeeper/backupstore/collect"
	"github.com/groundskeeper-io/groundskeeper/retention"
)

func TestTTLField(t *testing.T) {
	policy := collect.TTLField("spec.ttl", func(o *metav1.PartialObjectMetadata) string { return o.Annotations["ttl"] })
	for _, tc := range []struct {
		ttl  string
		want retention.Policy
		err  string
	}{
		{"", retention.TTL{ZeroMeansForever: true}, ""},
		{"0", retention.TTL{ZeroMeansForever: true}, ""},
		{"0d", retention.TTL{ZeroMeansForever: true}, ""},
		{"7d", retention.TTL{After: 7 * retention.Day, ZeroMeansForever: true}, ""},
		{"12h", retention.TTL{After: 12 * time.Hour, ZeroMeansForever: true}, ""},
		{"30D", nil, `spec.ttl "30D"`},
		{"-1d", nil, `spec.ttl "-1d"`},
		{"30", nil, `spec.ttl "30"`},
	} {
		got, err := policy(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"ttl": tc.ttl}}})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, retention.ErrInvalidDuration) {
				t.Errorf("ttl %q: %v, %v; want an error naming %s that is ErrInvalidDuration", tc.ttl, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ttl %q: %#v, %v; want %#v", tc.ttl, got, err, tc.want)
		}
	}
}
