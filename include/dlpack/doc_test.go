package dlpackh_test

import (
	"bytes"
	"os"
	"testing"

	dlpackh "github.com/godlpack/dlpack/include/dlpack"
)

func TestHeaderIsTheFileAndACopy(t *testing.T) {
	want, err := os.ReadFile("dlpack.h")
	if err != nil {
		t.Fatal(err)
	}
	h := dlpackh.Header()
	if !bytes.Equal(h, want) {
		t.Fatalf("Header() (%d bytes) differs from dlpack.h (%d bytes)", len(h), len(want))
	}
	h[0] ^= 0xff
	if !bytes.Equal(dlpackh.Header(), want) {
		t.Fatal("changing a returned header changed the next one")
	}
}
