package dlpackh_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// upstream11 is a DLPack 1.1 header as upstream guards it (PyTorch and TVM
// ship such copies); only what the snippets use is declared.
const upstream11 = `#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_
#include <stdint.h>
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1
typedef struct { uint32_t major; uint32_t minor; } DLPackVersion;
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
} DLManagedTensorVersioned;
#endif
`

// Our header next to another dlpack.h in one C file: an upstream-guarded
// 1.x header first or second is fine (the first declares the ABI), a
// pre-1.0 one first is refused with our message, and a copy under another
// guard conflicts, as docs/embedding.md says.
func TestHeaderBesideAnother(t *testing.T) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler:", err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("upstream11.h", upstream11)
	write("v08.h", "#ifndef DLPACK_DLPACK_H_\n#define DLPACK_DLPACK_H_\n#define DLPACK_VERSION 80\n#endif\n")
	write("otherguard.h", strings.ReplaceAll(upstream11, "DLPACK_DLPACK_H_", "OTHER_DLPACK_H"))
	use := "int minor(void) { DLManagedTensorVersioned m = {{1, 0}}; return (int)m.version.major * 0 + DLPACK_MINOR_VERSION; }\n"
	for _, c := range []struct {
		name, src, fail string // fail: "" to compile, else a substring of the compiler's error
	}{
		{"ours alone", `#include "dlpack/dlpack.h"` + "\n" + use, ""},
		{"upstream 1.1 first", `#include "upstream11.h"` + "\n" + `#include "dlpack/dlpack.h"` + "\n" + use +
			"_Static_assert(DLPACK_MINOR_VERSION == 1, \"the first header declares\");\n", ""},
		{"ours first", `#include "dlpack/dlpack.h"` + "\n" + `#include "upstream11.h"` + "\n" + use +
			"_Static_assert(DLPACK_MINOR_VERSION == 3, \"the first header declares\");\n", ""},
		{"pre-1.0 first", `#include "v08.h"` + "\n" + `#include "dlpack/dlpack.h"` + "\n", "not DLPack 1.x"},
		{"another guard", `#include "otherguard.h"` + "\n" + `#include "dlpack/dlpack.h"` + "\n", "DLPackVersion"},
	} {
		write("x.c", c.src)
		out, err := exec.Command(cc, "-fsyntax-only", "-Werror", "-I..", "-I"+dir, filepath.Join(dir, "x.c")).CombinedOutput()
		switch {
		case c.fail == "" && err != nil:
			t.Errorf("%s: does not compile: %v\n%s", c.name, err, out)
		case c.fail != "" && err == nil:
			t.Errorf("%s: compiles, want an error mentioning %q", c.name, c.fail)
		case c.fail != "" && !strings.Contains(string(out), c.fail):
			t.Errorf("%s: error does not mention %q:\n%s", c.name, c.fail, out)
		}
	}
}
