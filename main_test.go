package gaffer_test

import (
	"testing"

	"github.com/gafferhq/gaffer/internal/pgtest"
	"github.com/gafferhq/gaffer/internal/testnode"
)

func TestMain(m *testing.M) {
	// The process tests re-run this test binary as a worker node.
	testnode.Main()
	pgtest.Main(m)
}
