package client_test

import (
	"testing"

	"github.com/airlockhq/airlock/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }
