package collect

import "testing"

func TestWhereKeepsTheQueryAfterThePrefix(t *testing.T) {
	for _, tc := range []struct {
		loc  Location
		want string
	}{
		{Location{URL: "s3://b", Prefix: "db/x/"}, "s3://b/db/x/"},
		{Location{URL: "s3://b/", Prefix: "db/x/"}, "s3://b/db/x/"},
		{Location{URL: "s3://b?endpoint=http://127.0.0.1:9000&region=us-east-1", Prefix: "db/x/"}, "s3://b/db/x/?endpoint=http://127.0.0.1:9000&region=us-east-1"},
		{Location{URL: "file:///var/backups", Prefix: ""}, "file:///var/backups/"},
	} {
		if got := tc.loc.Where(); got != tc.want {
			t.Errorf("%+v.Where() = %q, want %q", tc.loc, got, tc.want)
		}
	}
}
