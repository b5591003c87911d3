package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlarrow"
	"github.com/godlpack/dlpack/internal/filekind"
	"github.com/godlpack/dlpack/tensorfile"
)

// format is a tensor file format.
type format string

const (
	formatNPY         format = "npy"
	formatNPZ         format = "npz"
	formatSafetensors format = "safetensors"
	formatArrow       format = "arrow"
)

// formatNamed reads a --from or --to value.
func formatNamed(s string) (format, error) {
	switch strings.ToLower(strings.TrimPrefix(s, ".")) {
	case "npy":
		return formatNPY, nil
	case "npz":
		return formatNPZ, nil
	case "safetensors", "st":
		return formatSafetensors, nil
	case "arrow", "feather", "ipc":
		return formatArrow, nil
	}
	return "", usagef("unknown format %q (npy, npz, safetensors, arrow)", s)
}

// formatByExtension names the format of path from its extension.
func formatByExtension(path string) (format, bool) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".npy":
		return formatNPY, true
	case ".npz":
		return formatNPZ, true
	case ".safetensors":
		return formatSafetensors, true
	case ".arrow", ".feather", ".ipc":
		return formatArrow, true
	}
	return "", false
}

// formatOf names the format of an existing file: by extension, else by its
// first bytes.
func formatOf(path string) (format, error) {
	if err := regular(path); err != nil {
		return "", err
	}
	if f, ok := formatByExtension(path); ok {
		return f, nil
	}
	fh, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	var head [9]byte
	n, _ := io.ReadFull(fh, head[:])
	b := head[:n]
	switch {
	case bytes.HasPrefix(b, []byte("\x93NUMPY")):
		return formatNPY, nil
	case bytes.HasPrefix(b, []byte("PK\x03\x04")), bytes.HasPrefix(b, []byte("PK\x05\x06")):
		return formatNPZ, nil
	case bytes.HasPrefix(b, []byte("ARROW1")):
		return formatArrow, nil
	case n == 9 && binary.LittleEndian.Uint64(b) < tensorfile.MaxSafetensorsHeader && b[8] == '{':
		return formatSafetensors, nil
	}
	return "", usagef("%s: cannot tell the format from the name or the first bytes; name it with --from", path)
}

// regular refuses an input that exists and is not a regular file, naming
// what it is: opening a named pipe blocks until a writer comes, and a
// directory or a device cannot be mapped. Any other error (no such file)
// is left to the library that opens the file, to report in its words.
func regular(path string) error {
	st, err := os.Stat(path)
	if err != nil || st.Mode().IsRegular() {
		return nil
	}
	return &fs.PathError{Op: "open", Path: path, Err: notRegular(st.Mode())}
}

// notRegular is the error about a file of mode m, which is not regular.
func notRegular(m fs.FileMode) error {
	return fmt.Errorf("not a regular file (%s)", filekind.Of(m))
}

// tensorSource is what both libraries' tensors are: a description of
// their memory, and a producer of it.
type tensorSource interface {
	dlpack.Source
	dlpack.Producer
}

// entry is one tensor of an input file, or an Arrow column with no tensor
// form (err, for which unsupported is true).
type entry struct {
	name    string
	dtype   dlpack.DataType
	shape   []int64
	strides []int64 // in elements, always filled
	bytes   int64
	mapped  bool
	crc     string // .npz members: "checked" or "unchecked" (mapped, not read); "" for formats without checksums
	src     tensorSource
	err     error
}

// input is an opened tensor file.
type input struct {
	path     string
	format   format
	entries  []*entry
	metadata map[string]string
	close    func()
}

// open maps the file at path through the library of its format; with
// verify, every .npz member is read and checked against its CRC-32 as
// the file opens, mapped ones included (the library's default); without,
// mapped members are not read (tensorfile.SkipMappedCRC, for a plain
// inspect).
func open(path string, f format, verify bool) (*input, error) {
	if err := regular(path); err != nil {
		return nil, err
	}
	in := &input{path: path, format: f}
	switch f {
	case formatNPY, formatNPZ, formatSafetensors:
		var (
			tf  *tensorfile.File
			err error
		)
		switch f {
		case formatNPY:
			tf, err = tensorfile.OpenNPY(path)
		case formatNPZ:
			if verify {
				tf, err = tensorfile.OpenNPZ(path)
			} else {
				tf, err = tensorfile.OpenNPZ(path, tensorfile.SkipMappedCRC())
			}
		default:
			tf, err = tensorfile.OpenSafetensors(path)
		}
		if err != nil {
			return nil, err
		}
		for _, t := range tf.Tensors() {
			e := &entry{name: t.Name(), dtype: t.DataType(), shape: t.Shape(), strides: t.Strides(),
				bytes: t.NBytes(), mapped: t.Mapped(), src: t}
			if f == formatNPZ {
				e.crc = "unchecked"
				if t.CRCChecked() {
					e.crc = "checked"
				}
			}
			in.entries = append(in.entries, e)
		}
		in.metadata = tf.Metadata()
		in.close = func() { _ = tf.Close() }
		return in, nil
	case formatArrow:
		return openArrow(in)
	}
	return nil, usagef("unknown format %q", f)
}

// unsupported reports whether err, a column's, says only that the column
// has no tensor form (its type, nulls, or bit-packed booleans): a column
// that Arrow's readers read, which inspect lists as skipped and convert
// --skip-unsupported leaves out. Any other error (ErrFormat, a buffer that
// does not decompress or does not hold its column, ErrTruncated, ...)
// means the file cannot be read as pyarrow's file reader reads it, and is
// the file's error.
func unsupported(err error) bool {
	return errors.Is(err, dlarrow.ErrType) || errors.Is(err, dlarrow.ErrNulls) || errors.Is(err, dlarrow.ErrBitPacked)
}

// openArrow reads each column of each record batch as a tensor (see the
// package doc for the one-row rule). A column with no tensor form is an
// entry with its error; any other error of a column fails the open.
func openArrow(in *input) (*input, error) {
	af, err := dlarrow.OpenFile(in.path)
	if err != nil {
		return nil, err
	}
	var tensors []*dlarrow.Tensor
	in.close = func() {
		for _, t := range tensors {
			t.Close()
		}
		_ = af.Close()
	}
	schema := af.Schema()
	if md := schema.Metadata(); md.Len() > 0 {
		in.metadata = make(map[string]string, md.Len())
		for i, k := range md.Keys() {
			in.metadata[k] = md.Values()[i]
		}
	}
	batches := af.NumRecordBatches()
	for b := 0; b < batches; b++ {
		for c, field := range schema.Fields() {
			name := field.Name
			if batches > 1 {
				name = fmt.Sprintf("%s[%d]", field.Name, b)
			}
			t, err := af.Column(b, c)
			if err != nil && !unsupported(err) {
				in.close()
				return nil, err
			}
			if err != nil {
				in.entries = append(in.entries, &entry{name: name, err: err})
				continue
			}
			tensors = append(tensors, t)
			// a column of a compressed batch is decompressed: a copy
			e := &entry{name: name, dtype: t.DataType(), shape: t.Shape(), strides: t.Strides(), mapped: !t.Copied(), src: t}
			if e.strides == nil {
				e.strides = rowMajor(e.shape)
			}
			ext, _ := field.Metadata.GetValue("ARROW:extension:name")
			if batches == 1 && ext == dlarrow.FixedShapeTensorName && len(e.shape) > 0 && e.shape[0] == 1 {
				e.shape, e.strides = e.shape[1:], e.strides[1:]
				e.src = reshaped{src: t, shape: e.shape, strides: e.strides}
			}
			e.bytes = elements(e.shape) * int64(e.dtype.ItemSize())
			in.entries = append(in.entries, e)
		}
	}
	return in, nil
}

// reshaped is a tensor seen with another shape and strides over the same
// elements: a leading dimension of 1 added or dropped.
type reshaped struct {
	src            dlpack.Source
	shape, strides []int64
}

func (r reshaped) DescribeTensor(d *dlpack.Description) error {
	if err := r.src.DescribeTensor(d); err != nil {
		return err
	}
	d.Shape, d.Strides = r.shape, r.strides
	return nil
}

func (r reshaped) DLPackDevice() dlpack.Device { return dlpack.CPUDevice }

func (r reshaped) DLPack(req dlpack.Request) (dlpack.Managed, error) { return dlpack.Produce(r, req) }

func rowMajor(shape []int64) []int64 {
	strides := make([]int64, len(shape))
	s := int64(1)
	for i := len(shape) - 1; i >= 0; i-- {
		strides[i] = s
		s *= shape[i]
	}
	return strides
}

func colMajor(shape []int64) []int64 {
	strides := make([]int64, len(shape))
	s := int64(1)
	for i := range shape {
		strides[i] = s
		s *= shape[i]
	}
	return strides
}

func elements(shape []int64) int64 {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	return n
}

// layout names the order of a tensor's elements: "C" (row-major), "F"
// (column-major) or "strided". Dimensions of size 1 may have any stride.
func layout(shape, strides []int64) string {
	same := func(want []int64) bool {
		for i, d := range shape {
			if d > 1 && strides[i] != want[i] {
				return false
			}
		}
		return true
	}
	if elements(shape) == 0 || same(rowMajor(shape)) {
		return "C"
	}
	if same(colMajor(shape)) {
		return "F"
	}
	return "strided"
}
