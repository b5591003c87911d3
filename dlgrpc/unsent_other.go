//go:build !linux

package dlgrpc

import "net"

// unsent is not known here: progress is what Write hands to the socket.
func unsent(net.Conn) (int64, bool) { return 0, false }
