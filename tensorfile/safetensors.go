package tensorfile

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"io"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"github.com/godlpack/dlpack"
)

// MaxSafetensorsHeader is the largest safetensors header accepted (100 MB,
// the reference implementation's limit).
const MaxSafetensorsHeader = 100_000_000

// stChunk is how much of a safetensors header is read at a time.
const stChunk = 64 << 10

// stHeader is a parsed safetensors header.
type stHeader struct {
	tensors  []*Tensor // sorted by offset (Tensor.off, in the file); no File yet
	meta     map[string]string
	dataBase int64 // 8 + header length
}

// parseSafetensors parses and validates the header of a safetensors file
// of size bytes read through r: a little-endian u64 length N, N bytes of
// JSON {name: {"dtype", "shape", "data_offsets": [begin, end]},
// "__metadata__": {str: str}} starting with '{', in UTF-8, then the data.
// Like the reference implementation it requires the tensors to tile the
// data section exactly, in any order.
//
// The header is read chunk bytes at a time and never held whole (see
// stScanner): what stays is what the File keeps, the tensors, their
// names (copied into shared blocks, stArena) and shapes (dimArena), and
// names are checked unique with a table of indices (stNames), not a map
// of strings; so parsing a header of N bytes takes well under 2N bytes
// (TestSafetensorsHeaderMemory).
func parseSafetensors(r io.ReaderAt, size int64, chunk int) (*stHeader, error) {
	var pre [8]byte
	if size < 8 {
		return nil, fieldErr(ErrTruncated, "file size", size, "shorter than the 8-byte header length")
	}
	if _, err := r.ReadAt(pre[:], 0); err != nil {
		return nil, fieldErr(ErrTruncated, "header length", "unread", err.Error())
	}
	n := binary.LittleEndian.Uint64(pre[:])
	if n > MaxSafetensorsHeader {
		return nil, fieldErr(ErrFormat, "header length", n, "over the 100 MB limit")
	}
	if n > uint64(size-8) {
		return nil, fieldErr(ErrTruncated, "header length", n, fmt.Sprintf("past the end of the file (%d bytes)", size))
	}
	sc := newScanner(r, 8, int(n), chunk)
	if !sc.has() || sc.b[0] != '{' {
		return nil, fieldErr(ErrFormat, "header", fmt.Sprintf("%q", sc.rest(40)), "must be a JSON object starting with '{'")
	}
	h := &stHeader{dataBase: 8 + int64(n)}
	var (
		slab    stSlab
		names   stNames
		arena   stArena
		dims    dimArena
		hasMeta bool
	)
	err := sc.members(true, func(key []byte) error {
		if string(key) == "__metadata__" {
			if hasMeta {
				return fieldErr(ErrFormat, "header", "__metadata__", "the name appears twice")
			}
			hasMeta = true
			m, err := sc.metadata()
			h.meta = m
			return err
		}
		t := slab.next()
		t.name = arena.add(key)
		if names.add(&slab) {
			return fieldErr(ErrFormat, "header", t.name, "the name appears twice")
		}
		return sc.entry(t, &dims, h.dataBase)
	})
	if err != nil {
		return nil, sc.finish(inString(err, "tensor name"))
	}
	if sc.ws(); sc.has() {
		err := fieldErr(ErrFormat, "header", fmt.Sprintf("%q", sc.rest(40)), "text after the JSON object")
		return nil, sc.finish(err)
	}
	if err := sc.finish(nil); err != nil {
		return nil, err
	}
	h.tensors = slab.pointers()
	return h, checkOffsets(h.tensors, h.dataBase, size)
}

// stSlab holds the tensors of a header, in the order it lists them, in
// blocks of 8, 16, ... 1024 tensors, then 1024 at a time: an allocation
// per thousand tensors, and none to move as the list grows.
type stSlab struct {
	blocks [][]Tensor
	n      int
}

// next returns a new zero tensor, the n-th.
func (s *stSlab) next() *Tensor {
	if len(s.blocks) == 0 || len(s.blocks[len(s.blocks)-1]) == cap(s.blocks[len(s.blocks)-1]) {
		s.blocks = append(s.blocks, make([]Tensor, 0, 8<<min(len(s.blocks), 7)))
	}
	b := &s.blocks[len(s.blocks)-1]
	*b = append(*b, Tensor{})
	s.n++
	return &(*b)[len(*b)-1]
}

// at returns the i-th tensor.
func (s *stSlab) at(i int) *Tensor {
	const small = 8 * (1<<8 - 1) // the tensors of the first 8 blocks
	if i < small {
		k := bits.Len(uint(i/8+1)) - 1
		return &s.blocks[k][i-8*(1<<k-1)]
	}
	return &s.blocks[8+(i-small)/1024][(i-small)%1024]
}

// pointers lists the tensors.
func (s *stSlab) pointers() []*Tensor {
	ts := make([]*Tensor, 0, s.n)
	for _, b := range s.blocks {
		for i := range b {
			ts = append(ts, &b[i])
		}
	}
	return ts
}

// stArena holds the names of a header's tensors in shared blocks (of
// 256 bytes, doubling up to 64 KiB): one allocation per many names, not
// one each, and none of the header kept.
type stArena struct{ block []byte }

// add returns b as a string, copied into the current block.
func (a *stArena) add(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > 4<<10 { // a long name has a block of its own
		return string(b)
	}
	if cap(a.block)-len(a.block) < len(b) {
		a.block = make([]byte, 0, min(max(2*cap(a.block), 256), 64<<10))
	}
	start := len(a.block)
	a.block = append(a.block, b...) // only past what earlier strings hold
	return unsafe.String(&a.block[start], len(b))
}

// stNames tells whether a header names a tensor twice: an open-addressed
// table of indices into the tensors, 4 bytes a slot and at least a
// quarter of them empty, where a map of strings would take several times
// that for each name.
type stNames struct {
	slots []uint32 // index + 1; 0 is empty
	n     int
	seed  maphash.Seed
}

// add records the last tensor of slab and reports whether another one
// has its name.
func (s *stNames) add(slab *stSlab) (dup bool) {
	if 4*(s.n+1) > 3*len(s.slots) {
		s.grow(slab)
	}
	if s.find(slab, slab.n-1) {
		return true
	}
	s.n++
	return false
}

// find looks up the name of the i-th tensor among those recorded, and
// records i when it is not there.
func (s *stNames) find(slab *stSlab, i int) bool {
	name := slab.at(i).name
	mask := uint64(len(s.slots) - 1)
	for k := maphash.String(s.seed, name) & mask; ; k = (k + 1) & mask {
		switch j := s.slots[k]; {
		case j == 0:
			s.slots[k] = uint32(i) + 1
			return false
		case slab.at(int(j)-1).name == name:
			return true
		}
	}
}

// grow doubles the table and records again the tensors before the last.
func (s *stNames) grow(slab *stSlab) {
	if s.slots == nil {
		s.seed = maphash.MakeSeed()
	}
	s.slots = make([]uint32, max(16, 2*len(s.slots)))
	for i := range slab.n - 1 {
		s.find(slab, i)
	}
}

// dimArena hands out the shapes of a header's entries from shared
// blocks (of 32 dimensions, doubling up to 4096): one allocation per
// thousand tensors, not one each.
type dimArena struct {
	buf  []int64
	size int // of the last block
}

// take returns n zeroed int64s (never nil) that no other take returns.
func (a *dimArena) take(n int) []int64 {
	if len(a.buf) < n || a.buf == nil {
		a.size = min(max(2*a.size, 32), 4096)
		a.buf = make([]int64, max(n, a.size))
	}
	s := a.buf[:n:n]
	a.buf = a.buf[n:]
	return s
}

// checkEntry checks one entry of a header whose data section starts at
// dataBase (hasDType says whether "dtype" was given; shape and offs are
// nil when absent) and fills t's type, shape (taken from dims), size and
// offset in the file.
func checkEntry(t *Tensor, dims *dimArena, dataBase int64, dtype string, hasDType bool, shape []uint64, offs []uint64) error {
	// Field names are built only for errors: headers list thousands.
	field := func(suffix string) string { return strconv.Quote(t.name) + suffix }
	if !hasDType || shape == nil || offs == nil {
		return fieldErr(ErrFormat, field(""), "incomplete", "needs \"dtype\", \"shape\" and \"data_offsets\"")
	}
	dt, ok := safetensorsTypes[dtype]
	if !ok {
		return badSafetensorsDType(field(".dtype"), dtype)
	}
	t.dtype = dt
	if len(offs) != 2 {
		return fieldErr(ErrFormat, field(".data_offsets"), offs, "must be [begin, end]")
	}
	for _, o := range offs {
		if o > 1<<63-1 {
			return fieldErr(ErrTruncated, field(".data_offsets"), offs, "offsets must be non-negative integers inside the file")
		}
	}
	begin, end := int64(offs[0]), int64(offs[1])
	if len(shape) > dlpack.MaxNDim {
		return fieldErr(ErrLayout, field(".shape"), len(shape), "more than "+strconv.Itoa(dlpack.MaxNDim)+" dimensions")
	}
	t.dims = dims.take(len(shape))
	t.ndim = uint8(len(shape))
	for i, d := range shape {
		if d > 1<<63-1 {
			return fieldErr(ErrLayout, field(".shape"), shape, "dimension overflows int64")
		}
		t.dims[i] = int64(d)
	}
	var scratch [dlpack.MaxNDim]int64 // the strides: row-major, not kept
	nbytes, _, err := layoutInto("shape", t.dims, dt.ItemSize(), false, scratch[:len(shape)])
	if err != nil {
		return renamed(err, field(".shape"))
	}
	if end < begin {
		return fieldErr(ErrLayout, field(".data_offsets"), offs, "end before begin")
	}
	if end-begin != nbytes {
		return fieldErr(ErrLayout, field(".data_offsets"), offs, fmt.Sprintf("%d bytes, but shape %v of %v needs %d", end-begin, t.dims, dt, nbytes))
	}
	if begin > 1<<62 {
		return fieldErr(ErrTruncated, field(".data_offsets"), offs, "offsets must be non-negative integers inside the file")
	}
	t.nbytes, t.off = nbytes, dataBase+begin
	return nil
}

// checkOffsets sorts the tensors by offset and requires them to tile the
// data section, from dataBase to the end of the file of size bytes,
// exactly: no gap, no overlap, nothing past the end.
func checkOffsets(ts []*Tensor, dataBase, size int64) error {
	byOffset := func(a, b *Tensor) int {
		return cmp.Or(cmp.Compare(a.off, b.off), cmp.Compare(a.nbytes, b.nbytes), cmp.Compare(a.name, b.name))
	}
	if !slices.IsSortedFunc(ts, byOffset) { // writers list them in order
		slices.SortStableFunc(ts, byOffset)
	}
	at, data := int64(0), size-dataBase
	for _, t := range ts {
		begin, end := t.off-dataBase, t.off-dataBase+t.nbytes
		if end <= data && begin == at {
			at = end
			continue
		}
		field := strconv.Quote(t.name) + ".data_offsets"
		if end > data {
			return fieldErr(ErrTruncated, field, []int64{begin, end}, fmt.Sprintf("past the end of the data (%d bytes)", data))
		}
		why := "overlaps the tensor before it"
		if begin > at {
			why = fmt.Sprintf("leaves a gap of %d bytes after offset %d", begin-at, at)
		}
		return fieldErr(ErrLayout, field, []int64{begin, end}, why)
	}
	if at != data {
		return fieldErr(ErrTruncated, "data", data, fmt.Sprintf("the tensors cover %d bytes of the %d-byte data section", at, data))
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
	h, err := parseSafetensors(fd, size, stChunk)
	if err != nil {
		return err
	}
	f.meta = h.meta
	for _, t := range h.tensors {
		t.file, t.readOnly = f, !f.writable
		if t.nbytes == 0 || t.off%int64(t.dtype.Alignment()) == 0 {
			continue
		}
		begin := t.off - h.dataBase
		if f.writable {
			return fieldErr(ErrLayout, fmt.Sprintf("%q.data_offsets", t.name), []int64{begin, begin + t.nbytes},
				fmt.Sprintf("file offset %d is misaligned for %v: a copy would not write to the file", t.off, t.dtype))
		}
		// A file whose header is not padded to 8 bytes (written before
		// the reference implementation padded it): consumers need
		// aligned elements, so this tensor is read into a Buffer, as a
		// misaligned .npz member is.
		buf, err := dlpack.NewBuffer[uint8]([]int64{t.nbytes})
		if err != nil {
			return err
		}
		f.bufs = append(f.bufs, buf)
		if _, err := fd.ReadAt(buf.Data(), t.off); err != nil {
			return fieldErr(ErrTruncated, fmt.Sprintf("%q.data_offsets", t.name), []int64{begin, begin + t.nbytes}, err.Error())
		}
		t.extra().buf = buf
	}
	f.tensors = h.tensors // names are unique: parseSafetensors checked
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
