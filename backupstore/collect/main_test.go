package collect_test

import (
	"testing"

	"github.com/groundskeeper-io/groundskeeper/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
