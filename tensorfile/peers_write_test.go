package tensorfile_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

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

// Everything the library writes (WriteNPY, WriteNPZ stored and deflated,
// WriteSafetensors, and CreateNPY and CreateSafetensors filled in place)
// is read back bit for bit by the library and by NumPy and safetensors.
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

	// the same tensors created in place
	specs := make([]tensorfile.Spec, len(st))
	for i, n := range st {
		specs[i] = tensorfile.Spec{Name: n.Name, DType: types[n.Name].dt, Shape: []int64{3, 1 + int64(indexOf(types[n.Name])%4), 2}}
	}
	cf, err := tensorfile.CreateSafetensors(filepath.Join(dir, "created.safetensors"), specs, meta)
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range cf.Tensors() {
		fillWith(t, tn, want[tn.Name()])
	}
	cf.Close()
	files = append(files, manifestEntry{File: "created.safetensors", Kind: "safetensors", Members: e.Members, Metadata: meta})
	for _, n := range npz {
		if strings.HasSuffix(n.Name, "_f") {
			continue // CreateNPY makes C-order arrays
		}
		g := types[n.Name]
		cn, err := tensorfile.CreateNPY(filepath.Join(dir, "created_"+n.Name+".npy"), g.dt, []int64{3, 1 + int64(indexOf(g)%4), 2})
		if err != nil {
			t.Fatal(err)
		}
		fillWith(t, cn.Tensors()[0], want[n.Name])
		cn.Close()
		files = append(files, manifestEntry{File: "created_" + n.Name + ".npy", Kind: "npy", Members: map[string]manifestMember{"": member(n.Name)}})
	}

	// read back here, then by the peers
	tensors := 0
	for _, e := range files {
		path := filepath.Join(dir, e.File)
		var f *tensorfile.File
		switch e.Kind {
		case "npy":
			f, err = tensorfile.OpenNPY(path)
		case "npz":
			f, err = tensorfile.OpenNPZ(path)
		case "safetensors":
			f, err = tensorfile.OpenSafetensors(path)
		}
		if err != nil {
			t.Errorf("%s: %v", e.File, err)
			continue
		}
		if len(f.Tensors()) != len(e.Members) || !mapsEqual(f.Metadata(), e.Metadata) {
			t.Errorf("%s: %d tensors, metadata %v; want %d, %v", e.File, len(f.Tensors()), f.Metadata(), len(e.Members), e.Metadata)
		}
		for name, m := range e.Members {
			tn, err := f.Tensor(name)
			if err != nil {
				t.Errorf("%s: %v", e.File, err)
				continue
			}
			b, err := os.ReadFile(filepath.Join(dir, m.Bin))
			if err != nil {
				t.Fatal(err)
			}
			checkTensor(t, e.File+" "+name, tn, m, b, false)
			tensors++
		}
		f.Close()
	}
	raw, _ := json.Marshal(files)
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d tensors in %d files written by Go read back by Go bit for bit", tensors, len(files))
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

// stCase is one set of tensors and metadata written by WriteSafetensors,
// CreateSafetensors and safetensors.numpy.save (peers.py save).
type stCase struct {
	Go       string            `json:"go"`     // WriteSafetensors' file
	Create   string            `json:"create"` // CreateSafetensors' file, filled in place
	Tensors  []stCaseTensor    `json:"tensors"`
	Metadata map[string]string `json:"metadata"` // null: none
}

type stCaseTensor struct {
	Name  string  `json:"name"`
	DType string  `json:"dtype"` // safetensors' name
	Shape []int64 `json:"shape"`
	Bin   string  `json:"bin"` // its row-major bytes
}

// TestPeersSafetensorsSameBytes: WriteSafetensors writes the file
// safetensors.numpy.save writes for the same tensors and metadata, byte
// for byte: layout (dtype in the crate's order, then name), header (key
// order, serde_json's escapes: names with < > &, U+2028, DEL, control
// characters, quotes, backslashes), padding; CreateSafetensors the same
// header JSON and data, padded to 64 bytes instead of 8. With several
// metadata keys the crate's order is its hash map's, different from run
// to run: the peer saves until it has seen every order, and Go's file
// must be one of them.
func TestPeersSafetensorsSameBytes(t *testing.T) {
	python(t)
	noLiveMappings(t)
	dir := t.TempDir()
	named, want, types := sources(t)
	var all []tensorfile.Named
	for _, n := range named {
		if types[n.Name].st != "" {
			all = append(all, n)
		}
	}
	odd := []string{"w<&>", "\u2028\u2029", "tab\there", "quote\"back\\slash/", "\x01ctl\x1f\x7f", "ünïcode ✓", "emoji 😀", "", "\b\f\n\r"}
	var special []tensorfile.Named
	for i, name := range odd {
		shape := [][]int64{{}, {0, 3}, {2}}[i%3]
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		xs := make([]float32, n)
		for j := range xs {
			xs[j] = float32(i*10 + j)
		}
		special = append(special, tensorfile.Named{Name: name, Tensor: dlpack.NewArray(xs, shape)})
		want[name] = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(xs))), 4*len(xs))
		types[name] = goType{dt: dlpack.Float32, st: "F32"}
	}
	cases := []struct {
		tensors  []tensorfile.Named
		metadata map[string]string
	}{
		{all, map[string]string{"format": "pt <&> \u2028 \"q\" \\ \x01 ✓"}},
		{special, nil},
		{special[:3], map[string]string{}},
		{nil, nil},
		{all[:4], map[string]string{"b key": "2", "a key": "1"}},
	}
	var manifest []stCase
	for i, c := range cases {
		sc := stCase{Go: fmt.Sprintf("go%d.safetensors", i), Create: fmt.Sprintf("create%d.safetensors", i), Metadata: c.metadata, Tensors: []stCaseTensor{}}
		fh, err := os.Create(filepath.Join(dir, sc.Go))
		if err != nil {
			t.Fatal(err)
		}
		if err := tensorfile.WriteSafetensors(fh, c.tensors, c.metadata); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if err := fh.Close(); err != nil {
			t.Fatal(err)
		}
		specs := make([]tensorfile.Spec, len(c.tensors))
		for j, n := range c.tensors {
			f := mustFrom(t, n.Tensor)
			specs[j] = tensorfile.Spec{Name: n.Name, DType: f.DataType(), Shape: f.Shape()}
			bin := fmt.Sprintf("case%d.%d.bin", i, j)
			if err := os.WriteFile(filepath.Join(dir, bin), want[n.Name], 0o644); err != nil {
				t.Fatal(err)
			}
			sc.Tensors = append(sc.Tensors, stCaseTensor{Name: n.Name, DType: types[n.Name].st, Shape: f.Shape(), Bin: bin})
		}
		cf, err := tensorfile.CreateSafetensors(filepath.Join(dir, sc.Create), specs, c.metadata)
		if err != nil {
			t.Fatalf("case %d: CreateSafetensors: %v", i, err)
		}
		for _, tn := range cf.Tensors() {
			fillWith(t, tn, want[tn.Name()])
		}
		cf.Close()
		manifest = append(manifest, sc)
	}
	raw, _ := json.Marshal(manifest)
	if err := os.WriteFile(filepath.Join(dir, "save.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Log(strings.TrimSpace(runPython(t, "testdata/peers.py", "save", dir)))
}

// mustFrom is dlpack.From(p), closed when the test ends.
func mustFrom(t *testing.T, p dlpack.Producer) dlpack.Foreign {
	t.Helper()
	f, err := dlpack.From(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// fillWith copies b, row-major bytes, into the compact tensor tn of a
// file opened read-write.
func fillWith(t *testing.T, tn *tensorfile.Tensor, b []byte) {
	t.Helper()
	f, err := dlpack.From(tn, dlpack.RequireWritable())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.NBytes() != int64(len(b)) {
		t.Fatalf("%s: %d bytes to fill, %d given", tn.Name(), f.NBytes(), len(b))
	}
	if len(b) == 0 {
		return
	}
	dst, err := dlpack.Slice[uint8](asBytes(t, f))
	if err != nil {
		t.Fatal(err)
	}
	copy(dst, b)
}
