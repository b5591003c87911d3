package tensorfile_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
)

// A JSON string escape of an unpaired UTF-16 surrogate names no
// character: the safetensors package refuses such a header as invalid
// JSON, so OpenSafetensors does too (encoding/json would read U+FFFD, a
// name the file does not hold). Paired escapes name a character and are
// read as it, as safetensors reads them.
func TestSafetensorsSurrogateEscapes(t *testing.T) {
	noLiveMappings(t)
	entry := `:{"dtype":"U8","shape":[1],"data_offsets":[0,1]}`
	paired := writeTemp(t, "paired.safetensors", stBytes(`{"a\ud83d\ude00b"`+entry+`}`, []byte{7}))
	f, err := tensorfile.OpenSafetensors(paired)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Tensor("a\U0001F600b"); err != nil {
		t.Errorf("paired escape: %v (names %v)", err, f.Tensors())
	}
	f.Close()

	lone := map[string]string{
		"high at the end":      `"a\ud800"`,
		"high before a letter": `"a\ud800b"`,
		"two highs":            `"\ud83d\ud83d"`,
		"low alone":            `"\ude00"`,
		"low before high":      `"\ude00\ud83d"`,
	}
	paths := []string{}
	for what, name := range lone {
		p := writeTemp(t, "lone.safetensors", stBytes(`{`+name+entry+`}`, []byte{7}))
		paths = append(paths, p)
		_, err := tensorfile.OpenSafetensors(p)
		var fe *dlpack.FieldError
		if !errors.Is(err, tensorfile.ErrFormat) || !strings.Contains(err.Error(), "unpaired UTF-16 surrogate") || !errors.As(err, &fe) || fe.Field != "tensor name" {
			t.Errorf("%s (%s): %v", what, name, err)
		}
	}

	t.Run("safetensors agrees", func(t *testing.T) {
		out := runPython(t, append([]string{"-c", `
import sys
from safetensors import safe_open
for p in sys.argv[1:]:
    try:
        with safe_open(p, framework="numpy") as f:
            print(p, "opened", [k.encode("utf-8", "surrogatepass").hex() for k in f.keys()])
    except Exception as e:
        print(p, "refused", type(e).__name__)
`, paired}, paths...)...)
		for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if i == 0 {
				if !strings.Contains(line, "opened ['61f09f988062']") {
					t.Errorf("paired: %s", line)
				}
			} else if !strings.Contains(line, "refused") {
				t.Errorf("lone: %s", line)
			}
		}
	})
}
