package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestWritesTheHeaderByteForByte(t *testing.T) {
	want, err := os.ReadFile("../../include/dlpack/dlpack.h")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "dlpack.h")
	if err := run(dir, true); err == nil {
		t.Fatal("-check passed without a dlpack.h")
	}
	if err := run(dir, false); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("written header differs from include/dlpack/dlpack.h (%d bytes, want %d)", len(got), len(want))
	}
	if err := run(dir, true); err != nil {
		t.Fatalf("-check of a fresh copy: %v", err)
	}
	if err := os.WriteFile(path, append(got, "/* edited */\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(dir, true); err == nil {
		t.Fatal("-check passed an edited copy")
	}
	if err := run(dir, false); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, want) {
		t.Fatal("rewriting an edited copy did not restore the header")
	}
}
