//go:build cgo

package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// python returns the interpreter with NumPy, ml_dtypes, safetensors and
// pyarrow (TENSORFILE_PYTHON, set by `make cli`), or skips the test.
func python(t *testing.T) string {
	t.Helper()
	py := os.Getenv("TENSORFILE_PYTHON")
	if py == "" {
		t.Skip("TENSORFILE_PYTHON is not set (make cli sets it)")
	}
	return py
}

func peers(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(python(t), append([]string{"testdata/peers.py"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("peers.py %s: %v", args[0], err)
	}
	return out
}

// peerTensor is a tensor as its own library reads it.
type peerTensor struct {
	DType  string  `json:"dtype"`
	Shape  []int64 `json:"shape"`
	SHA256 string  `json:"sha256"`
}

type peerFile struct {
	Tensors  map[string]peerTensor `json:"tensors"`
	Metadata map[string]string     `json:"metadata"`
}

// readPeers reads the files with NumPy, safetensors and pyarrow.
func readPeers(t *testing.T, paths ...string) map[string]peerFile {
	t.Helper()
	var got map[string]peerFile
	if err := json.Unmarshal(peers(t, append([]string{"read"}, paths...)...), &got); err != nil {
		t.Fatal(err)
	}
	return got
}

// writePeers has NumPy, safetensors and pyarrow write the test files.
func writePeers(t *testing.T) (dir string, files []string) {
	t.Helper()
	dir = t.TempDir()
	if err := json.Unmarshal(peers(t, "write", dir), &files); err != nil {
		t.Fatal(err)
	}
	return dir, files
}

// holds lists the dtypes each output format holds (the writers' and
// dlarrow's), by DLPack name, which is also NumPy's.
var holds = map[format][]string{
	formatNPY: {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
		"float16", "float32", "float64", "complex64", "complex128"},
	formatSafetensors: {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
		"float16", "bfloat16", "float32", "float64", "complex64", "float8_e4m3fn", "float8_e5m2",
		"float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"},
	formatArrow: {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64"},
}

func init() { holds[formatNPZ] = holds[formatNPY] }

// fits reports whether format out can hold the tensor (Arrow: no rows of
// zero elements).
func fits(out format, tn peerTensor) bool {
	if !slices.Contains(holds[out], tn.DType) {
		return false
	}
	if out == formatArrow {
		for _, d := range tn.Shape {
			if d == 0 {
				return false
			}
		}
	}
	return true
}

// inspect --json on files written by NumPy, safetensors and pyarrow says
// what those libraries read: names, dtypes, shapes, sizes; every tensor is
// mapped except the members of a deflated or unaligned .npz and the
// columns of a compressed Arrow file.
func TestPeersInspect(t *testing.T) {
	dir, files := writePeers(t)
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = filepath.Join(dir, f)
	}
	want := readPeers(t, paths...)
	rep, r := inspectJSON(t, paths...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	n := 0
	for _, f := range rep.Files {
		w := want[f.Path]
		got := map[string]jsonTensor{}
		for _, tn := range f.Tensors {
			got[tn.Name] = tn
		}
		if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(w.Tensors))) {
			t.Errorf("%s: tensors %v, %s reads %v", f.Path, slices.Sorted(maps.Keys(got)), f.Format, slices.Sorted(maps.Keys(w.Tensors)))
			continue
		}
		for name, tn := range got {
			pt := w.Tensors[name]
			if tn.DType != pt.DType || !slices.Equal(tn.Shape, pt.Shape) || tn.Bytes != elements(pt.Shape)*itemSize(t, pt.DType) {
				t.Errorf("%s %q: %s %v %d bytes, the peer reads %s %v", f.Path, name, tn.DType, tn.Shape, tn.Bytes, pt.DType, pt.Shape)
			}
			// np.savez_compressed deflates; np.savez stores without
			// aligning, so only members of 1-byte elements surely map
			switch base := filepath.Base(f.Path); {
			// and the columns of a compressed Arrow file are decompressed
			case base == "np_deflated.npz" && tn.Mapped,
				base == "np_stored.npz" && itemSize(t, tn.DType) == 1 && !tn.Mapped,
				strings.HasPrefix(base, "pa_feather_") && tn.Mapped,
				!strings.HasSuffix(base, ".npz") && !strings.HasPrefix(base, "pa_feather_") && !tn.Mapped:
				t.Errorf("%s %q: mapped %v", f.Path, name, tn.Mapped)
			}
			n++
		}
		if !maps.Equal(f.Metadata, w.Metadata) {
			t.Errorf("%s: metadata %v, the peer reads %v", f.Path, f.Metadata, w.Metadata)
		}
		if base := filepath.Base(f.Path); (base == "pa_table.arrow" || strings.HasPrefix(base, "pa_feather_")) && (len(f.Skipped) != 1 || f.Skipped[0].Name != "text" ||
			!strings.Contains(f.Skipped[0].Error, "dlarrow: type has no tensor form")) {
			t.Errorf("%s: skipped %+v", f.Path, f.Skipped)
		}
	}
	layouts := map[string]string{}
	for _, f := range rep.Files {
		for _, tn := range f.Tensors {
			layouts[filepath.Base(f.Path)+":"+tn.Name] = tn.Layout
		}
	}
	if layouts["np_fortran.npy:"] != "F" || layouts["np_stored.npz:fortran"] != "F" || layouts["pa_row.arrow:permuted"] != "F" || layouts["np_f4.npy:"] != "C" {
		t.Errorf("layouts: %v", layouts)
	}
	t.Logf("inspect: %d tensors of %d files written by NumPy, safetensors and pyarrow, as they read them", n, len(files))
}

func itemSize(t *testing.T, dtype string) int64 {
	switch {
	case strings.HasPrefix(dtype, "float8"), dtype == "bool", dtype == "int8", dtype == "uint8":
		return 1
	case dtype == "complex128":
		return 16
	}
	var bits int64
	for _, p := range []string{"bfloat", "float", "uint", "int", "complex"} {
		if rest, ok := strings.CutPrefix(dtype, p); ok {
			if _, err := fmt.Sscan(rest, &bits); err != nil {
				t.Fatalf("dtype %q", dtype)
			}
			return bits / 8
		}
	}
	t.Fatalf("dtype %q", dtype)
	return 0
}

// convert between every pair of formats, on files written by NumPy,
// safetensors and pyarrow, read back by them bit for bit (dtype, shape,
// SHA-256 of the bytes), metadata kept where both formats have it; a
// tensor the output format cannot hold fails with the library's error
// and leaves no file.
func TestPeersConvert(t *testing.T) {
	dir, files := writePeers(t)
	var srcPaths []string
	for _, f := range files {
		srcPaths = append(srcPaths, filepath.Join(dir, f))
	}
	src := readPeers(t, srcPaths...)
	outDir := filepath.Join(dir, "out")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	type job struct {
		out  string
		want peerFile
	}
	var jobs []job
	refused := 0
	for _, path := range srcPaths {
		in := src[path]
		inFmt, _ := formatByExtension(path)
		names := slices.Sorted(maps.Keys(in.Tensors))
		for _, out := range []format{formatNPY, formatNPZ, formatSafetensors, formatArrow} {
			var fit, unfit []string
			for _, name := range names {
				if fits(out, in.Tensors[name]) {
					fit = append(fit, name)
				} else {
					unfit = append(unfit, name)
				}
			}
			base := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
			outName := func(suffix string) string {
				return filepath.Join(outDir, base+suffix+"."+string(out))
			}
			if out == formatNPY {
				for _, name := range fit {
					o := outName("-" + strings.NewReplacer("[", "_", "]", "_").Replace(name))
					args := []string{"convert", path, o}
					if len(names) > 1 {
						args = append(args, "--tensor", name)
					}
					ok(t, args...)
					jobs = append(jobs, job{o, peerFile{Tensors: map[string]peerTensor{"": in.Tensors[name]}, Metadata: map[string]string{}}})
				}
			} else if len(fit) > 0 {
				o := outName("")
				// pa_table's string column has no tensor form
				args := []string{"convert", "--skip-unsupported", path, o}
				if len(unfit) > 0 {
					for _, name := range fit {
						args = append(args, "--tensor", name)
					}
				}
				ok(t, args...)
				want := peerFile{Tensors: map[string]peerTensor{}, Metadata: map[string]string{}}
				for _, name := range fit {
					key := name
					if key == "" {
						key = npyName
					}
					want.Tensors[key] = in.Tensors[name]
				}
				if (out == formatSafetensors || out == formatArrow) && (inFmt == formatSafetensors || inFmt == formatArrow) {
					want.Metadata = in.Metadata
				}
				jobs = append(jobs, job{o, want})
			}
			for _, name := range unfit {
				o := outName("-refused")
				r := tf(t, "convert", "--tensor", name, path, o)
				// the writers' sentinel, or dlarrow's (ToField)
				lib := "tensorfile: unsupported data type"
				if out == formatArrow {
					lib = "dlarrow: type has no tensor form"
					if fits(formatSafetensors, in.Tensors[name]) && slices.Contains(holds[formatArrow], in.Tensors[name].DType) {
						lib = "dlpack: invalid shape" // rows of no elements
					}
				}
				if r.code != 1 || !strings.Contains(r.stderr, lib) {
					t.Errorf("convert --tensor %s %s %s: exit %d, stderr %q; want exit 1 and the library's error", name, path, o, r.code, r.stderr)
				}
				if _, err := os.Stat(o); !os.IsNotExist(err) {
					t.Errorf("a refused convert left %s", o)
				}
				refused++
			}
		}
	}
	outs := make([]string, len(jobs))
	for i, j := range jobs {
		outs[i] = j.out
	}
	got := readPeers(t, outs...)
	tensors := 0
	for _, j := range jobs {
		g := got[j.out]
		if !maps.EqualFunc(g.Tensors, j.want.Tensors, func(a, b peerTensor) bool {
			return a.DType == b.DType && slices.Equal(a.Shape, b.Shape) && a.SHA256 == b.SHA256
		}) {
			t.Errorf("%s: read back\n%v\nwant\n%v", filepath.Base(j.out), g.Tensors, j.want.Tensors)
		}
		if !maps.Equal(g.Metadata, j.want.Metadata) {
			t.Errorf("%s: metadata %v, want %v", filepath.Base(j.out), g.Metadata, j.want.Metadata)
		}
		tensors += len(g.Tensors)
	}
	if entries, _ := os.ReadDir(outDir); len(entries) != len(jobs) {
		t.Errorf("%d files in the output directory for %d conversions", len(entries), len(jobs))
	}
	t.Logf("convert: %d files (%d tensors) read back by NumPy, safetensors and pyarrow bit for bit; %d refusals", len(jobs), tensors, refused)
}
