package locking_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/groundskeeper-io/groundskeeper/locking"
	"github.com/groundskeeper-io/groundskeeper/locking/memlock"
)

func TestOpen(t *testing.T) {
	openers := map[string]locking.Opener{"mem": memlock.Open}
	b, closer, err := locking.Open(context.Background(), "mem://", openers)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	l, err := locking.New(locking.Config{Backend: b, LockID: "dc1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(context.Background()); err != nil {
		t.Fatalf("take on an opened memory backend: %v", err)
	}

	for _, tc := range []struct{ url, want string }{
		{"", `lock URL "": want scheme://..., with a scheme of mem`},
		{"no-scheme", `lock URL "no-scheme": want scheme://`},
		{"etcd://h:2379/p/", `scheme "etcd": want one of mem`},
		{"mem://host", `memory lock URL "mem://host": want mem:// and nothing after it`},
		{"mem://?x=1", `want mem:// and nothing after it`},
		{"%zz://", `lock URL "%zz://"`},
	} {
		_, _, err := locking.Open(context.Background(), tc.url, openers)
		if !errors.Is(err, locking.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q) = %v, want ErrInvalidConfig saying %q", tc.url, err, tc.want)
		}
	}
	if _, _, err := locking.Open(context.Background(), "mem://", nil); err == nil || !strings.Contains(err.Error(), "no openers given") {
		t.Errorf("Open without openers = %v, want it said", err)
	}
}
