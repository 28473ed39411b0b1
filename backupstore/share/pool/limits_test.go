package pool_test

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/groundskeeper-io/groundskeeper/backupstore/share/pool"
)

func TestQuotaFlag(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{"two providers", []string{"--quota=aws=100,azure=50"}, "aws=100,azure=50", ""},
		{"repeated flag adds", []string{"--quota=gcp=3", "--quota=aws=2"}, "aws=2,gcp=3", ""},
		{"limit of zero", []string{"--quota=aws=0"}, "", `invalid value "aws=0" for flag -quota: "aws=0": the limit of provider "aws" must be a whole number of at least 1`},
		{"negative limit", []string{"--quota=aws=-1"}, "", `the limit of provider "aws" must be a whole number of at least 1`},
		{"not a number", []string{"--quota=aws=many"}, "", `"aws=many": the limit of provider "aws"`},
		{"no limit", []string{"--quota=aws"}, "", `"aws": want provider=limit`},
		{"no provider", []string{"--quota==3"}, "", `"=3": want provider=limit`},
		{"provider twice", []string{"--quota=aws=1,aws=2"}, "", `"aws=2": provider "aws" is given twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q pool.Limits
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			fs.Var(&q, "quota", "")
			err := fs.Parse(tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := q.String(); got != tc.want {
				t.Errorf("quota %q, want %q", got, tc.want)
			}
		})
	}
}
