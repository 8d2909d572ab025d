package bench_test

import (
	"testing"

	"github.com/gafferhq/gaffer/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
