package filekind

import (
	"io/fs"
	"testing"
)

func TestOf(t *testing.T) {
	for m, want := range map[fs.FileMode]string{
		0o644:                             "",
		fs.ModeDir | 0o755:                "a directory",
		fs.ModeNamedPipe | 0o644:          "a named pipe",
		fs.ModeSocket | 0o644:             "a socket",
		fs.ModeDevice | 0o644:             "a device",
		fs.ModeDevice | fs.ModeCharDevice: "a device",
		fs.ModeIrregular:                  "mode ?---------",
	} {
		if got := Of(m); got != want {
			t.Errorf("Of(%v) = %q, want %q", m, got, want)
		}
	}
}
