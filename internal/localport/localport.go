// Package localport finds a free TCP port on the loopback interface for a
// server a test starts.
package localport

import "net"

// Free returns a port no one listens on at 127.0.0.1 right now. Another
// process may take it before the caller does; the callers' servers fail
// to start then, and say so.
func Free() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
