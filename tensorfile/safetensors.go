package tensorfile

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/godlpack/dlpack"
)

// MaxSafetensorsHeader is the largest safetensors header accepted (100 MB,
// the reference implementation's limit).
const MaxSafetensorsHeader = 100_000_000

// stEntry is one tensor of a parsed safetensors header.
type stEntry struct {
	name       string
	dtype      dlpack.DataType
	shape      []int64
	strides    []int64
	begin, end int64 // in the data section
}

type stHeader struct {
	entries  []stEntry // sorted by offset
	meta     map[string]string
	dataBase int64 // 8 + header length
}

// safetensorsJSON checks the 8-byte length of a safetensors header and
// returns the JSON object it frames: in the file, under the size limit,
// starting with '{', valid UTF-8.
func safetensorsJSON(b []byte, size int64) ([]byte, error) {
	if len(b) < 8 || size < 8 {
		return nil, fieldErr(ErrTruncated, "file size", size, "shorter than the 8-byte header length")
	}
	n := binary.LittleEndian.Uint64(b)
	if n > MaxSafetensorsHeader {
		return nil, fieldErr(ErrFormat, "header length", n, "over the 100 MB limit")
	}
	if n > uint64(size-8) || n > uint64(len(b)-8) {
		return nil, fieldErr(ErrTruncated, "header length", n, fmt.Sprintf("past the end of the file (%d bytes)", size))
	}
	hdr := b[8 : 8+n]
	if len(hdr) == 0 || hdr[0] != '{' {
		return nil, fieldErr(ErrFormat, "header", fmt.Sprintf("%q", truncate(strings.TrimRight(string(hdr), " "), 40)), "must be a JSON object starting with '{'")
	}
	if !utf8.Valid(hdr) {
		return nil, fieldErr(ErrFormat, "header", "invalid UTF-8", "the JSON header must be UTF-8")
	}
	return hdr, nil
}

// parseSafetensors parses and validates the header of a safetensors file
// of size bytes whose first bytes are b (at least 8 + N of them; the data
// section's size is checked against the offsets): a little-endian u64 length N, N bytes of JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__":
// {str: str}}, then the data. Like the reference implementation it
// requires the tensors to tile the data section exactly, in any order.
func parseSafetensors(b []byte, size int64) (*stHeader, error) {
	hdr, err := safetensorsJSON(b, size)
	if err != nil {
		return nil, err
	}
	h := &stHeader{dataBase: 8 + int64(len(hdr))}
	// Names are substrings of one copy of the header (one allocation,
	// not one per tensor), unless they hold escapes.
	sc := &stScanner{b: hdr, s: string(hdr)}
	// One '{' per entry as a rule (a fast count), bounded by the shortest
	// entry's size should strings hold braces.
	n := min(bytes.Count(hdr, []byte{'{'}), len(hdr)/48)
	seen := make(map[string]bool, n+1)
	h.entries = make([]stEntry, 0, n)
	var dims dimArena
	err = sc.object(func(key []byte) error {
		name := sc.text(key)
		if seen[name] {
			return fieldErr(ErrFormat, "header", name, "the name appears twice")
		}
		seen[name] = true
		if name == "__metadata__" {
			m, err := sc.metadata()
			h.meta = m
			return err
		}
		e, err := sc.entry(name, &dims)
		h.entries = append(h.entries, e)
		return err
	})
	if err != nil {
		return nil, inString(err, "tensor name")
	}
	if sc.ws(); sc.i != len(hdr) {
		return nil, fieldErr(ErrFormat, "header", fmt.Sprintf("%q", truncate(strings.TrimRight(string(hdr[sc.i:]), " "), 40)), "text after the JSON object")
	}
	return h, h.checkOffsets(size - h.dataBase)
}

// dimArena hands out the shapes and strides of a header's entries from
// shared blocks: one allocation per few thousand tensors, not two each.
type dimArena struct{ buf []int64 }

// take returns n zeroed int64s (never nil) that no other take returns.
func (a *dimArena) take(n int) []int64 {
	if len(a.buf) < n || a.buf == nil {
		a.buf = make([]int64, max(n, 4096))
	}
	s := a.buf[:n:n]
	a.buf = a.buf[n:]
	return s
}

func checkEntry(name string, dtype *string, shape []uint64, offs []uint64) (stEntry, error) {
	var dt string
	if dtype != nil {
		dt = *dtype
	}
	return checkEntryIn(new(dimArena), name, dt, dtype != nil, shape, offs)
}

// checkEntryIn checks one entry of a header (hasDType says whether
// "dtype" was given, shape and offs are nil when absent), taking its
// shape and strides from dims.
func checkEntryIn(dims *dimArena, name string, dtype string, hasDType bool, shape []uint64, offs []uint64) (stEntry, error) {
	// Field names are built only for errors: headers list thousands.
	field := func(suffix string) string { return strconv.Quote(name) + suffix }
	e := stEntry{name: name}
	if !hasDType || shape == nil || offs == nil {
		return e, fieldErr(ErrFormat, field(""), "incomplete", "needs \"dtype\", \"shape\" and \"data_offsets\"")
	}
	dt, ok := safetensorsTypes[dtype]
	if !ok {
		return e, badSafetensorsDType(field(".dtype"), dtype)
	}
	e.dtype = dt
	if len(offs) != 2 {
		return e, fieldErr(ErrFormat, field(".data_offsets"), offs, "must be [begin, end]")
	}
	for _, o := range offs {
		if o > 1<<63-1 {
			return e, fieldErr(ErrTruncated, field(".data_offsets"), offs, "offsets must be non-negative integers inside the file")
		}
	}
	e.begin, e.end = int64(offs[0]), int64(offs[1])
	if len(shape) > dlpack.MaxNDim {
		return e, fieldErr(ErrLayout, field(".shape"), len(shape), "more than "+strconv.Itoa(dlpack.MaxNDim)+" dimensions")
	}
	both := dims.take(2 * len(shape))
	e.shape = both[:len(shape):len(shape)]
	for i, d := range shape {
		if d > 1<<63-1 {
			return e, fieldErr(ErrLayout, field(".shape"), shape, "dimension overflows int64")
		}
		e.shape[i] = int64(d)
	}
	nbytes, strides, err := layoutInto("shape", e.shape, dt.ItemSize(), false, both[len(shape):])
	if err != nil {
		return e, renamed(err, field(".shape"))
	}
	e.strides = strides
	if e.end < e.begin {
		return e, fieldErr(ErrLayout, field(".data_offsets"), offs, "end before begin")
	}
	if e.end-e.begin != nbytes {
		return e, fieldErr(ErrLayout, field(".data_offsets"), offs, fmt.Sprintf("%d bytes, but shape %v of %v needs %d", e.end-e.begin, e.shape, dt, nbytes))
	}
	return e, nil
}

// checkOffsets sorts the entries by offset and requires them to tile the
// data section [0, size) exactly: no gap, no overlap, nothing past the end.
func (h *stHeader) checkOffsets(size int64) error {
	byOffset := func(a, b stEntry) int {
		return cmp.Or(cmp.Compare(a.begin, b.begin), cmp.Compare(a.end, b.end), cmp.Compare(a.name, b.name))
	}
	if !slices.IsSortedFunc(h.entries, byOffset) { // writers list them in order
		slices.SortStableFunc(h.entries, byOffset)
	}
	at := int64(0)
	for _, e := range h.entries {
		if e.end <= size && e.begin == at {
			at = e.end
			continue
		}
		field := strconv.Quote(e.name) + ".data_offsets"
		if e.end > size {
			return fieldErr(ErrTruncated, field, []int64{e.begin, e.end}, fmt.Sprintf("past the end of the data (%d bytes)", size))
		}
		if e.begin != at {
			why := "overlaps the tensor before it"
			if e.begin > at {
				why = fmt.Sprintf("leaves a gap of %d bytes after offset %d", e.begin-at, at)
			}
			return fieldErr(ErrLayout, field, []int64{e.begin, e.end}, why)
		}
		at = e.end
	}
	if at != size {
		return fieldErr(ErrTruncated, "data", size, fmt.Sprintf("the tensors cover %d bytes of the %d-byte data section", at, size))
	}
	return nil
}

// OpenSafetensors maps the safetensors file at path (read-only unless
// ReadWrite) and returns its tensors, each a view of the mapping (the
// data section starts right after the header, at 8 + N), ordered by
// offset, and its __metadata__. Nothing of the data is read, except a
// tensor misaligned for its element type (a header not padded to 8
// bytes), which is read into a dlpack.Buffer (Tensor.Mapped is false; a
// ReadWrite open fails with ErrLayout instead). Dtypes:
// BOOL, U8..U64, I8..I64, F16, BF16, F32, F64, C64, F8_E4M3
// (float8_e4m3fn), F8_E5M2, F8_E8M0 (float8_e8m0fnu), F8_E4M3FNUZ and
// F8_E5M2FNUZ (float8_e4m3fnuz, float8_e5m2fnuz); the sub-byte F4 and F6
// types fail with ErrDType.
func OpenSafetensors(path string, opts ...Option) (*File, error) {
	f, fd, size, err := openFile(path, opts)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	if err := f.loadSafetensors(fd, size); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (f *File) loadSafetensors(fd io.ReaderAt, size int64) error {
	b, err := readPrefix(fd, 8, size)
	if err != nil {
		return err
	}
	if len(b) == 8 {
		if n := binary.LittleEndian.Uint64(b); n <= MaxSafetensorsHeader && n <= uint64(size-8) {
			if b, err = readPrefix(fd, 8+int64(n), size); err != nil {
				return err
			}
		}
	}
	h, err := parseSafetensors(b, size)
	if err != nil {
		return err
	}
	f.meta = h.meta
	f.tensors = make([]*Tensor, 0, len(h.entries))
	slab := make([]Tensor, len(h.entries)) // one allocation for all
	for i, e := range h.entries {
		t := &slab[i]
		*t = Tensor{file: f, name: e.name, dtype: e.dtype, shape: e.shape, strides: e.strides, nbytes: e.end - e.begin, readOnly: !f.writable}
		switch off := h.dataBase + e.begin; {
		case t.nbytes == 0:
		case off%int64(e.dtype.Alignment()) == 0:
			t.data = f.m.at(off)
		case f.writable:
			return fieldErr(ErrLayout, fmt.Sprintf("%q.data_offsets", e.name), []int64{e.begin, e.end},
				fmt.Sprintf("file offset %d is misaligned for %v: a copy would not write to the file", off, e.dtype))
		default:
			// A file whose header is not padded to 8 bytes (written
			// before the reference implementation padded it):
			// consumers need aligned elements, so this tensor is read
			// into a Buffer, as a misaligned .npz member is.
			buf, err := dlpack.NewBuffer[uint8]([]int64{t.nbytes})
			if err != nil {
				return err
			}
			f.bufs = append(f.bufs, buf)
			if _, err := fd.ReadAt(buf.Data(), off); err != nil {
				return fieldErr(ErrTruncated, fmt.Sprintf("%q.data_offsets", e.name), []int64{e.begin, e.end}, err.Error())
			}
			t.buf = buf
		}
		f.tensors = append(f.tensors, t) // names are unique: parseSafetensors checked
	}
	return nil
}

// notUTF8 is why a name or metadata string that is not UTF-8 is refused:
// the JSON header would carry U+FFFD in its place, another name than the
// caller's (and two such names as one).
const notUTF8 = "not valid UTF-8 (the header is JSON text)"

// checkText refuses metadata keys and values that are not valid UTF-8.
func checkText(metadata map[string]string) error {
	for k, v := range metadata {
		if !utf8.ValidString(k) {
			return fieldErr(ErrFormat, "__metadata__ key", strconv.Quote(k), notUTF8)
		}
		if !utf8.ValidString(v) {
			return fieldErr(ErrFormat, "__metadata__["+strconv.Quote(k)+"]", strconv.Quote(v), notUTF8)
		}
	}
	return nil
}

// Named is a tensor to write under a name.
type Named struct {
	Name   string
	Tensor dlpack.Producer // a Foreign, a dlpack.Array, a Buffer, a Tensor of a File...
}

// WriteSafetensors writes tensors (any strides, any of the dtypes
// OpenSafetensors reads; the one-byte types without a Go element type are
// written as their bytes) and metadata (may be nil) to w
// as a safetensors file, byte for byte as the reference writer (Python's
// safetensors, its Rust crate) writes the same tensors: tensors sorted by
// decreasing dtype in the crate's order (by alignment), then by name, so
// each is aligned for its type; the JSON header lists __metadata__ first
// (its keys sorted; the crate's order is its hash map's), then the tensors
// in data order, strings escaped as serde_json escapes them, and is padded
// with spaces to a multiple of 8 bytes. Each tensor is taken with
// dlpack.From and released before WriteSafetensors returns. Names and
// metadata must be valid UTF-8, names unique and not "__metadata__", and
// the header no longer than MaxSafetensorsHeader (ErrFormat otherwise):
// nothing is written unless OpenSafetensors can read it back.
func WriteSafetensors(w io.Writer, tensors []Named, metadata map[string]string) error {
	srcs := make([]dlpack.Foreign, 0, len(tensors))
	defer func() {
		for _, f := range srcs {
			f.Close()
		}
	}()
	specs := make([]stTensor, len(tensors))
	for i, nt := range tensors {
		f, err := dlpack.From(nt.Tensor)
		if err != nil {
			return err
		}
		srcs = append(srcs, f)
		if err := checkSource(f); err != nil {
			return err
		}
		specs[i] = stTensor{name: nt.Name, dtype: f.DataType(), shape: f.Shape()}
	}
	lay, err := layoutSafetensors(specs, metadata, 8)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<16)
	bw.Write(lay.head)
	for _, i := range lay.order {
		if err := writeElements(bw, srcs[i]); err != nil {
			return err
		}
	}
	return bw.Flush()
}
