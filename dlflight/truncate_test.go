//go:build unix

package dlflight

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
	"google.golang.org/grpc/codes"
)

// truncateFrom cuts the file at path to size bytes from another process
// (coreutils truncate), as a deployment tool replacing a file in place
// would.
func truncateFrom(t *testing.T, path string, size int) {
	t.Helper()
	if out, err := exec.Command("truncate", "-s", strconv.Itoa(size), path).CombinedOutput(); err != nil {
		t.Fatalf("truncate: %v: %s", err, out)
	}
}

// mappedNPY writes a float32 .npy of rows x 1024 values and opens it
// mapped; it returns the file, its tensor and the values.
func mappedNPY(t *testing.T, rows int64) (string, *tensorfile.File, *tensorfile.Tensor, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "t.npy")
	src := newRaw(t, dlpack.Float32, rows, 1024)
	var buf bytes.Buffer
	if err := tensorfile.WriteNPY(&buf, src); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(path, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	f, err := tensorfile.OpenNPY(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tn := f.Tensors()[0]
	if !tn.Mapped() {
		t.Fatal("the tensor is not mapped")
	}
	return path, f, tn, src.data
}

// A registered tensor whose file another process truncates is not sent:
// DoGet fails with Internal naming ErrTruncated instead of killing the
// server, which goes on serving; a mapped tensor put by a client fails the
// same way, with an error wrapping tensorfile.ErrTruncated. Both a tensor
// sent in one message and one split over several.
func TestMappedFileTruncated(t *testing.T) {
	for _, max := range []int{0, 1 << 20} {
		t.Run("max="+strconv.Itoa(max), func(t *testing.T) {
			s, addr := serve(t, Options{MaxMessageBytes: max})
			c := dial(t, addr, ClientOptions{MaxMessageBytes: max})
			other := newRaw(t, dlpack.Float32, 3, 5)
			if err := s.Register("other", other); err != nil {
				t.Fatal(err)
			}

			// the whole file served before the truncation, then refused
			path, _, tn, want := mappedNPY(t, 1024) // 4 MiB
			if err := s.Register("m", tn); err != nil {
				t.Fatal(err)
			}
			got, err := c.Get(ctxT(t), "m")
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Fatal("the mapped tensor arrived changed")
			}
			got.Close()
			truncateFrom(t, path, 4096)
			_, err = c.Get(ctxT(t), "m")
			wantCode(t, errors.Unwrap(err), codes.Internal)
			if !strings.Contains(err.Error(), tensorfile.ErrTruncated.Error()) {
				t.Fatalf("DoGet of a truncated file: %v, want ErrTruncated named", err)
			}
			t.Logf("DoGet: %v", err)
			// the server lives on
			g, err := c.Get(ctxT(t), "other")
			if err != nil {
				t.Fatal(err)
			}
			sameTensor(t, g, other)
			g.Close()

			// Put of a truncated mapping
			path, _, tn, _ = mappedNPY(t, 1024)
			truncateFrom(t, path, 4096)
			err = c.Put(ctxT(t), "p", tn)
			if !errors.Is(err, tensorfile.ErrTruncated) || !errors.Is(err, ErrTruncated) {
				t.Fatalf("Put of a truncated file: %v, want ErrTruncated", err)
			}
			t.Logf("Put: %v", err)
			if names := s.Names(); len(names) != 2 {
				t.Fatalf("held %v after the failed Put", names)
			}
			if !s.Unregister("m") {
				t.Fatal("m not held")
			}
		})
	}
}

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o644) }
