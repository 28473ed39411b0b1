package soak

import (
	"strings"
	"testing"
)

func TestSize(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want int
	}{{"", 10}, {"0", 10}, {"false", 10}, {"1", 1000}, {"true", 1000}} {
		t.Setenv(Env, tc.env)
		if got := Size(10, 1000); got != tc.want {
			t.Errorf("%s=%q: Size(10, 1000) = %d, want %d", Env, tc.env, got, tc.want)
		}
	}
}

func TestSizeRefusesANonBoolean(t *testing.T) {
	t.Setenv(Env, "yes please")
	defer func() {
		msg, _ := recover().(string)
		if !strings.Contains(msg, Env) || !strings.Contains(msg, `"yes please"`) {
			t.Errorf("panic %q; want one naming %s and its value", msg, Env)
		}
	}()
	Size(10, 1000)
	t.Error("Size did not refuse a value that is not a boolean")
}
