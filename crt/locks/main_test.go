package locks_test

import (
	"testing"

	"github.com/groundskeeper-io/groundskeeper/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
