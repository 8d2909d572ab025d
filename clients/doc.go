// Package clients holds no Go code of its own: it is the home of
// Gaffer's reference remote-worker clients in other languages (python/,
// typescript/) and of their tests. protocol_test.go checks each client's
// table of endpoints and fields against api/openapi.json; clients_test.go
// runs each client's example against a real `gaffer server` with
// PostgreSQL and etcd; packaging_test.go runs each client's own unit
// tests, installs the Python package with pip (offline) and type-checks
// and packs the TypeScript one.
package clients
