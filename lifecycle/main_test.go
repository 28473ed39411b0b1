package lifecycle_test

import (
	"flag"
	"testing"

	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func TestMain(m *testing.M) {
	// The scenario tests spend their time waiting for the controller
	// manager, each in its own namespace; run more of them at once than
	// there are cores, unless -parallel was given or we are fuzzing (where
	// -parallel is the number of fuzzing processes).
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" || f.Name == "test.fuzz" })
	if !set {
		_ = flag.Set("test.parallel", "24")
	}
	testenv.Main(m)
}
