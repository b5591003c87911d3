//go:build unix

package dlarrow

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack/internal/arrowfb"
)

// ipcBytes is an Arrow IPC file of one batch of one column, named "v", of
// type dt holding 1, 2, 3, 4.
func ipcBytes(t *testing.T, dt arrow.DataType) []byte {
	t.Helper()
	mem := memory.NewGoAllocator()
	arr, _, err := array.FromJSON(mem, dt, strings.NewReader("[1, 2, 3, 4]"))
	if err != nil {
		t.Fatal(err)
	}
	defer arr.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "v", Type: dt}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{arr}, 4)
	defer rec.Release()
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// footerAt returns where the footer starts in data.
func footerAt(data []byte) int {
	n := len(data)
	return n - 10 - int(binary.LittleEndian.Uint32(data[n-10:]))
}

// blockAt returns the position in data of the first Block of the footer
// vector at vtable offset vo (8 dictionaries, 10 record batches).
func blockAt(t *testing.T, data []byte, vo int) int {
	t.Helper()
	at := footerAt(data)
	b := arrowfb.Buf(data[at : len(data)-10])
	root, _ := b.Deref(0)
	ft, ok := b.Table(root)
	if !ok {
		t.Fatal("no footer table")
	}
	start, n, ok := ft.Vector(vo, 24)
	if !ok || n == 0 {
		t.Fatalf("no blocks at %d", vo)
	}
	return at + start
}

func openBytes(t *testing.T, data []byte) (*File, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "f.arrow")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return OpenFile(path)
}

// A footer that disagrees with the stream it indexes is refused, naming
// both values; pyarrow's file reader follows the footer, this package the
// stream, so reading either would give values another reader does not.
func TestOpenFileFooterDisagrees(t *testing.T) {
	u32, f32 := ipcBytes(t, arrow.PrimitiveTypes.Uint32), ipcBytes(t, arrow.PrimitiveTypes.Float32)
	if len(u32) != len(f32) || footerAt(u32) != footerAt(f32) {
		t.Fatal("the uint32 and float32 files are not laid out alike")
	}
	// the stream of the float32 file, the footer of the uint32 one
	spliced := append(append([]byte(nil), f32[:footerAt(f32)]...), u32[footerAt(u32):]...)
	patched := func(vo, field int, delta int64) []byte {
		d := append([]byte(nil), u32...)
		p := blockAt(t, d, vo) + field
		if field == 8 {
			binary.LittleEndian.PutUint32(d[p:], uint32(int64(binary.LittleEndian.Uint32(d[p:]))+delta))
		} else {
			binary.LittleEndian.PutUint64(d[p:], uint64(int64(binary.LittleEndian.Uint64(d[p:]))+delta))
		}
		return d
	}
	lessBatches := append([]byte(nil), u32...)
	binary.LittleEndian.PutUint32(lessBatches[blockAt(t, lessBatches, 10)-4:], 0)
	cases := []struct {
		name  string
		data  []byte
		field string
		says  string
	}{
		{"schema", spliced, "footer.schema.fields[0]", `the footer's schema says "v": uint32, the stream's "v": float32`},
		{"offset", patched(10, 0, 8), "footer.recordBatches[0].offset", "the stream's message says"},
		{"metadata length", patched(10, 8, 8), "footer.recordBatches[0].metaDataLength", "the stream's message says"},
		{"body length", patched(10, 16, -8), "footer.recordBatches[0].bodyLength", "the stream's message says"},
		{"batch count", lessBatches, "footer.recordBatches", "the footer lists 0, the stream holds 1"},
	}
	for _, c := range cases {
		f, err := openBytes(t, c.data)
		if err == nil {
			f.Close()
		}
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want ErrFormat naming %s and saying %q", c.name, err, c.field, c.says)
		}
	}
	// a dictionary batch's Block, in a pyarrow-written file
	dict, err := os.ReadFile(filepath.Join("testdata", "ipc", "dictionary.arrow"))
	if err != nil {
		t.Fatal(err)
	}
	p := blockAt(t, dict, 8) + 16
	binary.LittleEndian.PutUint64(dict[p:], binary.LittleEndian.Uint64(dict[p:])+8)
	if f, err := openBytes(t, dict); err == nil || !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "footer.dictionaries[0].bodyLength") {
		if f != nil {
			f.Close()
		}
		t.Errorf("dictionary block: %v, want ErrFormat naming footer.dictionaries[0].bodyLength", err)
	}
	// the intact files open
	for _, d := range [][]byte{u32, f32} {
		f, err := openBytes(t, d)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
}

// A compressed buffer's declared uncompressed length is checked against
// the schema before anything is allocated, and the decompressed size must
// be the declared one; the error names the batch and the buffer.
func TestColumnCompressedLies(t *testing.T) {
	intact, err := os.ReadFile(writeIPC(t, 10, ipc.WithZstd(), ipc.WithMinSpaceSavings(0)))
	if err != nil {
		t.Fatal(err)
	}
	f, err := openBytes(t, intact)
	if err != nil {
		t.Fatal(err)
	}
	msg := f.batches[0].msg
	bm, err := readBatchMeta(msg.meta)
	if err != nil {
		t.Fatal(err)
	}
	bodyAt := int(uintptr(unsafe.Pointer(unsafe.SliceData(msg.body))) - uintptr(unsafe.Pointer(unsafe.SliceData(f.m.data))))
	x := bm.buffers[1] // the values of x: 10 float64
	if x.length < 8 || binary.LittleEndian.Uint64(msg.body[x.offset:]) != 80 {
		t.Fatalf("buffer 1 is %+v", x)
	}
	f.Close()
	declare := func(n int64) []byte {
		d := append([]byte(nil), intact...)
		binary.LittleEndian.PutUint64(d[bodyAt+int(x.offset):], uint64(n))
		return d
	}
	for _, c := range []struct {
		name string
		data []byte
		says string
	}{
		{"huge", declare(1 << 40), "buffer 1: uncompressed length 1099511627776 where the schema allows 128"},
		{"negative", declare(-2), "buffer 1: uncompressed length -2"},
		{"short", declare(96), "buffer 1: decompresses to 80 bytes, declared 96"},
		{"long", declare(72), "buffer 1: decompresses to more than the declared 72 bytes"},
	} {
		f, err := openBytes(t, c.data)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		tn, err := f.Column(0, 0)
		if err == nil {
			tn.Close()
		}
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "record batch") {
			t.Errorf("%s: %v, want ErrFormat saying %q", c.name, err, c.says)
		}
		f.Close()
	}
}

// Every buffer of a batch must lie inside its body at an offset that is a
// multiple of 8 (as Arrow C++ requires), or OpenFile refuses the file
// naming the buffer.
func TestOpenFileBufferBounds(t *testing.T) {
	intact := ipcBytes(t, arrow.PrimitiveTypes.Int64)
	f, err := openBytes(t, intact)
	if err != nil {
		t.Fatal(err)
	}
	msg := f.batches[0].msg
	bm, err := readBatchMeta(msg.meta)
	if err != nil {
		t.Fatal(err)
	}
	at := int(uintptr(unsafe.Pointer(unsafe.SliceData(msg.meta)))-uintptr(unsafe.Pointer(unsafe.SliceData(f.m.data)))) + bm.bufAt
	f.Close()
	set := func(i int, offset, length int64) []byte {
		d := append([]byte(nil), intact...)
		binary.LittleEndian.PutUint64(d[at+16*i:], uint64(offset))
		binary.LittleEndian.PutUint64(d[at+16*i+8:], uint64(length))
		return d
	}
	for _, c := range []struct {
		name string
		data []byte
		says string
	}{
		{"unaligned", set(1, 4, 8), "buffer 1 at offset 4 does not start on an 8-byte boundary"},
		{"past the body", set(1, 0, 1<<20), "buffer 1 at [0, +1048576) is outside the body of 32 bytes"},
		{"negative", set(1, -8, 32), "buffer 1 at [-8, +32) is outside the body"},
	} {
		f, err := openBytes(t, c.data)
		if err == nil {
			f.Close()
		}
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want ErrFormat saying %q", c.name, err, c.says)
		}
	}
}

// A record batch that lists fewer buffers than its columns take is
// refused: arrow-go would read the missing buffer descriptors from the
// bytes past the end of the vector, where Arrow's C++ reader (pyarrow)
// raises "buffer_index out of range".
func TestOpenFileTooFewBuffers(t *testing.T) {
	data := ipcBytes(t, arrow.PrimitiveTypes.Uint32)
	f, err := openBytes(t, data)
	if err != nil {
		t.Fatal(err)
	}
	meta := f.batches[0].msg.meta
	at := int(uintptr(unsafe.Pointer(unsafe.SliceData(meta))) - uintptr(unsafe.Pointer(unsafe.SliceData(f.m.data))))
	bm, err := readBatchMeta(meta)
	f.Close()
	if err != nil || len(bm.buffers) != 2 {
		t.Fatalf("the batch's buffers: %v, %v", bm.buffers, err)
	}
	// the vector's length is the u32 before its first element
	short := append([]byte(nil), data...)
	binary.LittleEndian.PutUint32(short[at+bm.bufAt-4:], 1)
	f, err = openBytes(t, short)
	if err == nil {
		f.Close()
	}
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "record batch 0.buffers") || !strings.Contains(err.Error(), "take at least 2 buffers") {
		t.Errorf("a batch of 1 buffer for a uint32 column: %v, want ErrFormat naming record batch 0.buffers", err)
	}
}
