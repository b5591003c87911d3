// Package filekind names what a path is when it is not a regular file, so
// that every opener of tensor files refuses a directory, a named pipe (which
// would block until a writer came), a socket or a device the same way.
package filekind

import "io/fs"

// Of returns "" for a regular file, else what m is: "a directory", "a
// named pipe", "a socket", "a device", or the mode's type letters.
func Of(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return ""
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "mode " + m.Type().String()
}
