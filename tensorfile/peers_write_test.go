package tensorfile_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
)

// goType is a dtype the Go writers write, with its names.
type goType struct {
	dt     dlpack.DataType
	descr  string // NumPy's type string ("" when NumPy has no builtin)
	st     string // safetensors name
	mlName string // the ml_dtypes name in the manifest, when descr is ""
}

var goTypes = []goType{
	{dlpack.Bool, "|b1", "BOOL", ""}, {dlpack.Int8, "|i1", "I8", ""}, {dlpack.Int16, "<i2", "I16", ""},
	{dlpack.Int32, "<i4", "I32", ""}, {dlpack.Int64, "<i8", "I64", ""}, {dlpack.Uint8, "|u1", "U8", ""},
	{dlpack.Uint16, "<u2", "U16", ""}, {dlpack.Uint32, "<u4", "U32", ""}, {dlpack.Uint64, "<u8", "U64", ""},
	{dlpack.Float16, "<f2", "F16", ""}, {dlpack.Float32, "<f4", "F32", ""}, {dlpack.Float64, "<f8", "F64", ""},
	{dlpack.Complex64, "<c8", "C64", ""}, {dlpack.Complex128, "<c16", "", ""},
	{dlpack.BFloat16, "", "BF16", "bfloat16"}, {dlpack.Float8E4M3FN, "", "F8_E4M3", "float8_e4m3fn"},
	{dlpack.Float8E5M2, "", "F8_E5M2", "float8_e5m2"},
	{dlpack.Float8E4M3FNUZ, "", "F8_E4M3FNUZ", "float8_e4m3fnuz"}, {dlpack.Float8E5M2FNUZ, "", "F8_E5M2FNUZ", "float8_e5m2fnuz"},
	{dlpack.Float8E8M0FNU, "", "F8_E8M0", "float8_e8m0fnu"},
}

// pattern is n elements of dt, every byte varied (bools 0 and 1).
func pattern(dt dlpack.DataType, n int, seed int) []byte {
	b := make([]byte, n*dt.ItemSize())
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
		if dt == dlpack.Bool {
			b[i] &= 1
		}
	}
	return b
}

// columnMajor reorders the row-major elements of b (of shape and item
// size) into column-major order.
func columnMajor(b []byte, shape []int64, size int) []byte {
	n := len(b) / size
	out := make([]byte, len(b))
	idx := make([]int64, len(shape))
	for k := range n {
		// k is the row-major index; idx its multi-index
		off, mul := int64(0), int64(1)
		for d := range shape {
			off += idx[d] * mul
			mul *= shape[d]
		}
		copy(out[off*int64(size):], b[k*size:(k+1)*size])
		for d := len(shape) - 1; d >= 0; d-- {
			idx[d]++
			if idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return out
}

func shapeString(shape []int64) string {
	s := make([]string, len(shape))
	for i, d := range shape {
		s[i] = fmt.Sprint(d)
	}
	if len(s) == 1 {
		return "(" + s[0] + ",)"
	}
	return "(" + strings.Join(s, ", ") + ")"
}

// sources opens, for every Go type, Go-made files holding a C-order and
// a Fortran-order (column-major strides) tensor of the same row-major
// elements; it returns the tensors and their row-major bytes.
func sources(t *testing.T) (named []tensorfile.Named, want map[string][]byte, types map[string]goType) {
	t.Helper()
	want, types = map[string][]byte{}, map[string]goType{}
	for i, g := range goTypes {
		shape := []int64{3, 1 + int64(i%4), 2}
		rm := pattern(g.dt, int(shape[0]*shape[1]*shape[2]), i+1)
		for _, fortran := range []bool{false, true} {
			name := fmt.Sprintf("%s_%v", g.dt, map[bool]string{false: "c", true: "f"}[fortran])
			body := rm
			if fortran {
				body = columnMajor(rm, shape, g.dt.ItemSize())
			}
			var f *tensorfile.File
			var err error
			if g.descr != "" {
				hdr := fmt.Sprintf("{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", g.descr, map[bool]string{false: "False", true: "True"}[fortran], shapeString(shape))
				f, err = tensorfile.OpenNPY(writeTemp(t, name+".npy", npyBytes(hdr, body)))
			} else if !fortran {
				// NumPy has no such dtype: a safetensors source instead.
				hdr := fmt.Sprintf(`{%q:{"dtype":"%s","shape":[%d,%d,%d],"data_offsets":[0,%d]}}`, name, g.st, shape[0], shape[1], shape[2], len(body))
				f, err = tensorfile.OpenSafetensors(writeTemp(t, name+".safetensors", stBytes(hdr, body)))
			} else {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			named = append(named, tensorfile.Named{Name: name, Tensor: f.Tensors()[0]})
			want[name], types[name] = rm, g
		}
	}
	return named, want, types
}

// Files written by Go read back in NumPy and safetensors bit for bit.
func TestPeersGoWritesPythonReads(t *testing.T) {
	python(t)
	noLiveMappings(t)
	dir := t.TempDir()
	named, want, types := sources(t)
	var files []manifestEntry
	member := func(name string) manifestMember {
		g := types[name]
		bin := name + ".bin"
		if err := os.WriteFile(filepath.Join(dir, bin), want[name], 0o644); err != nil {
			t.Fatal(err)
		}
		dt := g.descr
		if dt == "" {
			dt = g.mlName
		}
		return manifestMember{Bin: bin, Shape: []int64{3, 1 + int64(indexOf(g)%4), 2}, DType: dt}
	}
	create := func(name string, write func(*os.File) error) {
		fh, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := write(fh); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := fh.Close(); err != nil {
			t.Fatal(err)
		}
	}
	var npz, st []tensorfile.Named
	for _, n := range named {
		g := types[n.Name]
		if g.descr != "" {
			create(n.Name+".npy", func(fh *os.File) error { return tensorfile.WriteNPY(fh, n.Tensor) })
			files = append(files, manifestEntry{File: n.Name + ".npy", Kind: "npy", Members: map[string]manifestMember{"": member(n.Name)}})
			npz = append(npz, n)
		}
		if g.st != "" {
			st = append(st, n)
		}
	}
	for _, compress := range []bool{false, true} {
		name := fmt.Sprintf("go_%v.npz", map[bool]string{false: "stored", true: "deflated"}[compress])
		create(name, func(fh *os.File) error { return tensorfile.WriteNPZ(fh, npz, compress) })
		e := manifestEntry{File: name, Kind: "npz", Members: map[string]manifestMember{}}
		for _, n := range npz {
			e.Members[n.Name] = member(n.Name)
		}
		files = append(files, e)
		// Go's stored archives are aligned: every member maps.
		f, err := tensorfile.OpenNPZ(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, tn := range f.Tensors() {
			if tn.Mapped() == compress {
				t.Errorf("%s %s: Mapped %v", name, tn.Name(), tn.Mapped())
			}
		}
		f.Close()
	}
	meta := map[string]string{"writer": "tensorfile", "quote\"<&>": "ünïcode"}
	create("go.safetensors", func(fh *os.File) error { return tensorfile.WriteSafetensors(fh, st, meta) })
	e := manifestEntry{File: "go.safetensors", Kind: "safetensors", Members: map[string]manifestMember{}, Metadata: meta}
	for _, n := range st {
		e.Members[n.Name] = member(n.Name)
	}
	files = append(files, e)
	raw, _ := json.Marshal(files)
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log(strings.TrimSpace(runPython(t, "testdata/peers.py", "check", dir)))
}

func indexOf(g goType) int {
	for i, x := range goTypes {
		if x == g {
			return i
		}
	}
	return -1
}
