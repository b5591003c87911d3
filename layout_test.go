//go:build cgo

package dlpack_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"structs"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/internal/cshim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goLayout returns the Go size of every mirror struct and the offset and
// size of every field, named like the C table (struct.field, C names). The
// leading structs.HostLayout marker is not a C field; hostLayoutMarked
// checks it is there.
func goLayout() map[string][2]uintptr {
	out := map[string][2]uintptr{}
	add := func(cName string, v any, fields ...string) {
		t := reflect.TypeOf(v)
		out[cName] = [2]uintptr{0, t.Size()}
		for i, f := range fields {
			sf := t.Field(i + 1)
			out[cName+"."+f] = [2]uintptr{sf.Offset, sf.Type.Size()}
		}
	}
	add("DLPackVersion", dlpack.Version{}, "major", "minor")
	add("DLDevice", dlpack.Device{}, "device_type", "device_id")
	add("DLDataType", dlpack.DataType{}, "code", "bits", "lanes")
	add("DLTensor", dlpack.Tensor{}, "data", "device", "ndim", "dtype", "shape", "strides", "byte_offset")
	add("DLManagedTensor", dlpack.ManagedTensor{}, "dl_tensor", "manager_ctx", "deleter")
	add("DLManagedTensorVersioned", dlpack.ManagedTensorVersioned{}, "version", "manager_ctx", "deleter", "flags", "dl_tensor")
	add("DLPackExchangeAPIHeader", dlpack.ExchangeAPIHeader{}, "version", "prev_api")
	add("DLPackExchangeAPI", dlpack.ExchangeAPI{}, "header", "managed_tensor_allocator",
		"managed_tensor_from_py_object_no_sync", "managed_tensor_to_py_object_no_sync",
		"dltensor_from_py_object_no_sync", "current_work_stream")
	return out
}

// TestLayoutMatchesC checks every struct size and every field's offset and
// size against the C compiler, and prints the table.
func TestLayoutMatchesC(t *testing.T) {
	gol := goLayout()
	cl := cshim.Layout()
	require.Len(t, cl, len(gol), "the C table and the Go table must list the same fields")
	for _, f := range cl {
		g, ok := gol[f.Name]
		require.True(t, ok, "Go mirror lacks %s", f.Name)
		t.Logf("%-56s offset %3d size %3d", f.Name, f.Offset, f.Size)
		require.Equal(t, f.Offset, g[0], "offset of %s", f.Name)
		require.Equal(t, f.Size, g[1], "size of %s", f.Name)
	}
	// The sizes every 64-bit DLPack implementation agrees on.
	require.Equal(t, uintptr(48), gol["DLTensor"][1])
	require.Equal(t, uintptr(64), gol["DLManagedTensor"][1])
	require.Equal(t, uintptr(80), gol["DLManagedTensorVersioned"][1])
}

// TestLayoutAssertionsBreakTheBuild proves the compile-time checks in
// cgo_bridge.go work: a copy of the package whose Tensor mirror has an
// extra trailing field (so its size, and every struct containing it,
// differ from C) must fail to build.
func TestLayoutAssertionsBreakTheBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a copy of the package")
	}
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "minifloat"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "internal", "nilcheck"), 0o755))
	for _, pattern := range []string{"*.go", "*.c", "go.mod", "go.sum", "minifloat/*.go", "internal/nilcheck/*.go"} {
		files, err := filepath.Glob(pattern)
		require.NoError(t, err)
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
		}
	}
	require.NoError(t, os.CopyFS(filepath.Join(dir, "include"), os.DirFS("include")))
	build := func() (string, error) {
		cmd := exec.Command("go", "build", ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "CGO_ENABLED=1")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := build()
	require.NoError(t, err, "the unmodified copy builds: %s", out)

	src, err := os.ReadFile(filepath.Join(dir, "dlpack.go"))
	require.NoError(t, err)
	broken := strings.Replace(string(src), "\tByteOffset uint64\n", "\tByteOffset uint64\n\t_          [8]byte\n", 1)
	require.NotEqual(t, string(src), broken)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dlpack.go"), []byte(broken), 0o644))
	out, err = build()
	require.Error(t, err, "a mirror of the wrong size must not build")
	assert.Contains(t, out, "out of bounds", "the layout assertion is what fails: %s", out)
}

// Every mirror struct, and each struct it nests, opens with the
// structs.HostLayout marker: without it Go does not promise the C order
// and padding, and the marker does not reach nested structs by itself.
func TestMirrorStructsHaveHostLayout(t *testing.T) {
	marker := reflect.TypeFor[structs.HostLayout]()
	for _, v := range []any{dlpack.Version{}, dlpack.Device{}, dlpack.DataType{}, dlpack.Tensor{},
		dlpack.ManagedTensor{}, dlpack.ManagedTensorVersioned{}, dlpack.ExchangeAPIHeader{}, dlpack.ExchangeAPI{}} {
		typ := reflect.TypeOf(v)
		f := typ.Field(0)
		assert.Equal(t, marker, f.Type, "%v: first field", typ)
		assert.Equal(t, "_", f.Name, "%v: the marker is a blank field", typ)
		assert.Zero(t, f.Type.Size(), "%v: the marker adds no bytes", typ)
		for i := 1; i < typ.NumField(); i++ {
			if ft := typ.Field(i).Type; ft.Kind() == reflect.Struct {
				assert.Equal(t, marker, ft.Field(0).Type, "%v.%s (%v) is marked too", typ, typ.Field(i).Name, ft)
			}
		}
	}
}
