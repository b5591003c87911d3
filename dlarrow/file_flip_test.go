//go:build unix

package dlarrow

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"
)

// readOutcome is what reading a whole file gives: an error at OpenFile,
// or for each column of each batch a tensor (dtype, shape, bytes) or an
// error.
type readOutcome struct {
	openErr error
	cols    map[[2]int]string // "" for an error
	errs    map[[2]int]error
}

func readAll(path string) readOutcome {
	f, err := OpenFile(path)
	if err != nil {
		return readOutcome{openErr: err}
	}
	defer f.Close()
	out := readOutcome{cols: map[[2]int]string{}, errs: map[[2]int]error{}}
	for b := 0; b < f.NumRecordBatches(); b++ {
		for c := 0; c < f.Schema().NumFields(); c++ {
			tn, err := f.Column(b, c)
			if err != nil {
				out.errs[[2]int{b, c}] = err
				out.cols[[2]int{b, c}] = ""
				continue
			}
			n := int64(tn.st.dt.ItemSize())
			for _, d := range tn.shape {
				n *= d
			}
			var data []byte
			if tn.strides == nil && n > 0 {
				data = tn.buf[tn.offset : int64(tn.offset)+n]
			}
			out.cols[[2]int{b, c}] = fmt.Sprintf("%v %v %v %x", tn.st.dt, tn.shape, tn.strides, data)
			tn.Close()
		}
	}
	return out
}

// failed reports whether reading the file failed where reading the intact
// file (want) did not: at OpenFile, or for a column want reads.
func (o readOutcome) failed(want readOutcome) bool {
	if o.openErr != nil {
		return true
	}
	for k := range o.errs {
		if want.errs[k] == nil {
			return true
		}
	}
	return false
}

// dataSpans returns the byte ranges of the file that hold buffers of
// batch bodies: a flip there may change values without any reader
// noticing (Arrow IPC has no checksum).
func dataSpans(t *testing.T, path string) [][2]int {
	t.Helper()
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var spans [][2]int
	msgs := append([]message(nil), f.dicts...)
	for i := range f.batches {
		msgs = append(msgs, f.batches[i].msg)
	}
	for _, m := range msgs {
		bm, err := readBatchMeta(m.meta)
		if err != nil {
			t.Fatal(err)
		}
		at := int(uintptr(unsafe.Pointer(unsafe.SliceData(m.body))) - uintptr(unsafe.Pointer(unsafe.SliceData(f.m.data))))
		for _, s := range bm.buffers {
			spans = append(spans, [2]int{at + int(s.offset), at + int(s.offset+s.length)})
		}
	}
	return spans
}

// The flip sweep: every byte of small pyarrow-written files (with a
// dictionary batch, lz4- and zstd-compressed, a fixed_shape_tensor
// column), one bit flipped each.
// Nothing may panic; a flip outside the buffers of the bodies must make
// reading fail or read what the intact file reads. With DLARROW_PYTHON
// set (make arrow), pyarrow's file reader (pa.ipc.open_file, get_batch)
// judges too: where it raises, reading here must fail; where both read a
// column, the values must be equal.
func TestOpenFileFlipSweep(t *testing.T) {
	py := os.Getenv("DLARROW_PYTHON")
	dir := t.TempDir()
	for _, name := range []string{"dictionary.arrow", "compressed_lz4.arrow", "compressed_zstd.arrow", "extension.arrow"} {
		src := filepath.Join("testdata", "ipc", name)
		intact, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		want := readAll(src)
		if want.openErr != nil {
			t.Fatal(want.openErr)
		}
		spans := dataSpans(t, src)
		inData := func(i int) bool {
			for _, s := range spans {
				if i >= s[0] && i < s[1] {
					return true
				}
			}
			return false
		}
		var paths []string
		outcomes := map[string]readOutcome{}
		offsets := map[string]int{}
		failed, same, data := 0, 0, 0
		for i := range intact {
			flipped := append([]byte(nil), intact...)
			flipped[i] ^= 1 << (i % 8)
			path := filepath.Join(dir, fmt.Sprintf("%s.%d", name, i))
			if err := os.WriteFile(path, flipped, 0o644); err != nil {
				t.Fatal(err)
			}
			got := readAll(path)
			paths, outcomes[path], offsets[path] = append(paths, path), got, i
			switch {
			case got.failed(want):
				failed++
				continue
			case fmt.Sprint(got.cols) == fmt.Sprint(want.cols):
				same++
				continue
			}
			data++
			if !inData(i) {
				t.Errorf("%s: byte %d (bit %d), outside the buffers, reads\n%v\nwhere the intact file reads\n%v", name, i, i%8, got.cols, want.cols)
			}
		}
		t.Logf("%s: %d flips: %d fail, %d read as the intact file, %d read other values (all in data buffers)", name, len(intact), failed, same, data)
		if py == "" {
			continue
		}
		judged := pyarrowRead(t, py, paths)
		raised, agreed := 0, 0
		for _, path := range paths {
			p, got := judged[path], outcomes[path]
			if p.Error != "" {
				raised++
				if !got.failed(want) {
					t.Errorf("%s: byte %d: pyarrow raises %q, read here without an error", name, offsets[path], p.Error)
				}
				continue
			}
			if got.openErr != nil {
				continue
			}
			for key, val := range p.Columns {
				var b, c int
				fmt.Sscanf(key, "%d,%d", &b, &c)
				mine, ok := got.cols[[2]int{b, c}]
				if !ok || mine == "" {
					continue
				}
				if hexOf(mine) != val {
					t.Errorf("%s: byte %d: batch %d column %d reads %s here, %s in pyarrow", name, offsets[path], b, c, hexOf(mine), val)
				}
				agreed++
			}
		}
		t.Logf("%s: pyarrow raises on %d flips (all failing here too); %d columns read by both, equal", name, raised, agreed)
	}
}

func hexOf(col string) string { return col[strings.LastIndexByte(col, ' ')+1:] }

type pyarrowOutcome struct {
	Error   string            `json:"error"`
	Columns map[string]string `json:"columns"` // "batch,column": hex of the values
}

// pyarrowRead reads the files with pyarrow's file reader and returns,
// for each, its error or the bytes of each number column (through
// fixed-size lists and extension storage) of each batch.
func pyarrowRead(t *testing.T, py string, paths []string) map[string]pyarrowOutcome {
	t.Helper()
	const script = `
import json, sys
import pyarrow as pa

def values(col):
    if isinstance(col.type, pa.ExtensionType):
        col = col.storage
    while pa.types.is_fixed_size_list(col.type):
        col = col.flatten()
    t = col.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t)) or col.null_count:
        return None
    w = t.bit_width // 8
    return col.buffers()[1][col.offset * w:(col.offset + len(col)) * w].to_pybytes().hex()

out = {}
for path in sys.stdin.read().split("\n"):
    try:
        with pa.ipc.open_file(path) as r:
            batches = [r.get_batch(i) for i in range(r.num_record_batches)]
        cols = {}
        for b, batch in enumerate(batches):
            for c, col in enumerate(batch.columns):
                try:
                    v = values(col)
                except Exception:
                    v = None
                if v is not None:
                    cols[f"{b},{c}"] = v
        out[path] = {"columns": cols}
    except Exception as e:
        out[path] = {"error": f"{type(e).__name__}: {e}"}
print(json.dumps(out))
`
	cmd := exec.Command(py, "-c", script)
	cmd.Stdin = strings.NewReader(strings.Join(paths, "\n"))
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("pyarrow: %v", err)
	}
	var out map[string]pyarrowOutcome
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
