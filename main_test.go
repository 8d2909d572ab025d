package gaffer_test

import (
	"os"
	"testing"

	"github.com/gafferhq/gaffer/internal/pgtest"
)

func TestMain(m *testing.M) {
	// The process tests re-run this test binary as a worker node.
	if os.Getenv("GAFFER_TEST_NODE") != "" {
		os.Exit(runChildNode())
	}
	pgtest.Main(m)
}
