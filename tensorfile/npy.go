package tensorfile

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/godlpack/dlpack"
)

const npyMagic = "\x93NUMPY"

// npyHeader is a parsed .npy header.
type npyHeader struct {
	major, minor byte
	descr        string
	dtype        dlpack.DataType
	bigEndian    bool
	fortran      bool
	shape        []int64
	strides      []int64
	nbytes       int64 // data bytes that follow the header
	dataOffset   int64 // where the data starts
}

// parseNPYHeader parses the header at the start of b, the first bytes of a
// file of size bytes (all of the header, when it fits in the file): magic, version 1.0, 2.0 or 3.0, the header
// length and the dict literal {'descr': ..., 'fortran_order': ...,
// 'shape': (...)}, by a strict parser of exactly what NumPy writes (no
// evaluation; keys in any order, trailing commas and spaces allowed).
func parseNPYHeader(b []byte, size int64) (*npyHeader, error) {
	if len(b) < 10 || size < 10 {
		return nil, fieldErr(ErrTruncated, "file size", size, "shorter than the .npy preamble")
	}
	if string(b[:6]) != npyMagic {
		return nil, fieldErr(ErrFormat, "magic", fmt.Sprintf("%q", b[:6]), `not a .npy file (want "\x93NUMPY")`)
	}
	h := &npyHeader{major: b[6], minor: b[7]}
	var hlen, start int64
	switch h.major {
	case 1:
		hlen, start = int64(binary.LittleEndian.Uint16(b[8:])), 10
	case 2, 3:
		if len(b) < 12 || size < 12 {
			return nil, fieldErr(ErrTruncated, "file size", size, "shorter than the .npy 2.0 preamble")
		}
		hlen, start = int64(binary.LittleEndian.Uint32(b[8:])), 12
	default:
		return nil, fieldErr(ErrFormat, "version", fmt.Sprintf("%d.%d", h.major, h.minor), "only 1.0, 2.0 and 3.0 exist")
	}
	if h.minor != 0 {
		return nil, fieldErr(ErrFormat, "version", fmt.Sprintf("%d.%d", h.major, h.minor), "only 1.0, 2.0 and 3.0 exist")
	}
	if start+hlen > size || start+hlen > int64(len(b)) {
		return nil, fieldErr(ErrTruncated, "header_len", hlen, fmt.Sprintf("past the end of the file (%d bytes)", size))
	}
	h.dataOffset = start + hlen
	if err := h.parseDict(b[start : start+hlen]); err != nil {
		return nil, err
	}
	return h, nil
}

// npyLexer reads the Python dict literal of a .npy header.
type npyLexer struct {
	s []byte
	i int
}

func (l *npyLexer) space() {
	for l.i < len(l.s) && (l.s[l.i] == ' ' || l.s[l.i] == '\t' || l.s[l.i] == '\n' || l.s[l.i] == '\r') {
		l.i++
	}
}

// peek skips spaces and returns the next byte (0 at the end).
func (l *npyLexer) peek() byte {
	l.space()
	if l.i < len(l.s) {
		return l.s[l.i]
	}
	return 0
}

func (l *npyLexer) accept(c byte) bool {
	if l.peek() == c {
		l.i++
		return true
	}
	return false
}

func (l *npyLexer) errAt(why string) error {
	return fieldErr(ErrFormat, "header", fmt.Sprintf("%q", truncate(strings.TrimRight(string(l.s), " \n"), 120)), fmt.Sprintf("at byte %d: %s", l.i, why))
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// str reads a quoted string without escapes (NumPy's keys and type
// strings never need them).
func (l *npyLexer) str() (string, bool) {
	q := l.peek()
	if q != '\'' && q != '"' {
		return "", false
	}
	end := strings.IndexByte(string(l.s[l.i+1:]), q)
	if end < 0 {
		return "", false
	}
	s := string(l.s[l.i+1 : l.i+1+end])
	if strings.ContainsAny(s, "\\\n") {
		return "", false
	}
	l.i += end + 2
	return s, true
}

func (l *npyLexer) word() string {
	l.space()
	j := l.i
	for j < len(l.s) && (l.s[j] >= 'a' && l.s[j] <= 'z' || l.s[j] >= 'A' && l.s[j] <= 'Z' || l.s[j] >= '0' && l.s[j] <= '9' || l.s[j] == '_' || l.s[j] == '-' || l.s[j] == '+' || l.s[j] == '.') {
		j++
	}
	w := string(l.s[l.i:j])
	l.i = j
	return w
}

func (h *npyHeader) parseDict(text []byte) error {
	l := &npyLexer{s: text}
	if !l.accept('{') {
		return l.errAt("the header must be a dict literal starting with '{'")
	}
	seen := map[string]bool{}
	for !l.accept('}') {
		key, ok := l.str()
		if !ok {
			return l.errAt("expected a quoted key or '}'")
		}
		if seen[key] {
			return fieldErr(ErrFormat, "header."+key, "repeated", "each key must appear once")
		}
		seen[key] = true
		if !l.accept(':') {
			return l.errAt("expected ':' after a key")
		}
		var err error
		switch key {
		case "descr":
			err = h.parseDescrValue(l)
		case "fortran_order":
			switch w := l.word(); w {
			case "True":
				h.fortran = true
			case "False":
				h.fortran = false
			default:
				err = fieldErr(ErrFormat, "header.fortran_order", w, "must be True or False")
			}
		case "shape":
			err = h.parseShape(l)
		default:
			return fieldErr(ErrFormat, "header", key, "unknown key (a .npy header has exactly 'descr', 'fortran_order' and 'shape')")
		}
		if err != nil {
			return err
		}
		if !l.accept(',') {
			if !l.accept('}') {
				return l.errAt("expected ',' or '}'")
			}
			break
		}
	}
	if l.space(); l.i != len(l.s) {
		return l.errAt("text after the closing '}'")
	}
	for _, k := range []string{"descr", "fortran_order", "shape"} {
		if !seen[k] {
			return fieldErr(ErrFormat, "header."+k, "missing", "a .npy header has exactly 'descr', 'fortran_order' and 'shape'")
		}
	}
	nbytes, strides, err := layout("header.shape", h.shape, h.dtype.ItemSize(), h.fortran)
	if err != nil {
		return err
	}
	h.nbytes, h.strides = nbytes, strides
	return nil
}

func (h *npyHeader) parseDescrValue(l *npyLexer) error {
	if c := l.peek(); c == '[' || c == '(' || c == '{' {
		return fieldErr(ErrDType, "header.descr", string(c)+"...", "structured dtypes are not supported")
	}
	s, ok := l.str()
	if !ok {
		return l.errAt("descr must be a quoted type string")
	}
	dt, big, err := parseDescr(s)
	if err != nil {
		return err
	}
	h.descr, h.dtype, h.bigEndian = s, dt, big
	return nil
}

func (h *npyHeader) parseShape(l *npyLexer) error {
	if !l.accept('(') {
		return l.errAt("shape must be a tuple")
	}
	h.shape = []int64{}
	for !l.accept(')') {
		w := l.word()
		if h.major <= 2 && len(w) > 1 && w[len(w)-1] == 'L' {
			// Python 2 wrote longs as 2L; NumPy reads them from 1.0 and
			// 2.0 headers (with a warning), dropping the L.
			w = w[:len(w)-1]
		}
		n, err := strconv.ParseInt(w, 10, 64)
		if err != nil || w[0] == '+' || (len(w) > 1 && w[0] == '0') {
			if errors.Is(err, strconv.ErrRange) && w[0] != '-' {
				return fieldErr(ErrLayout, "header.shape", w, "dimension overflows int64")
			}
			return fieldErr(ErrFormat, "header.shape", w, "dimensions must be non-negative decimal integers")
		}
		if n < 0 {
			return fieldErr(ErrLayout, "header.shape", w, "negative dimension")
		}
		if len(h.shape) == dlpack.MaxNDim {
			return fieldErr(ErrLayout, "header.shape", "(...)", "more than "+strconv.Itoa(dlpack.MaxNDim)+" dimensions")
		}
		h.shape = append(h.shape, n)
		if !l.accept(',') {
			if len(h.shape) == 1 {
				return fieldErr(ErrFormat, "header.shape", "("+w+")", "a one-element tuple needs a trailing comma")
			}
			if !l.accept(')') {
				return l.errAt("expected ',' or ')' in shape")
			}
			break
		}
	}
	return nil
}

// OpenNPY maps the .npy file at path (read-only unless ReadWrite) and
// returns a File holding one tensor, named "", a view of the file's data:
// row-major strides for C order, column-major for Fortran order. Nothing
// of the data is read, unless it is misaligned for its element type (a
// header not padded to 16 or 64 bytes): it is then read into a
// dlpack.Buffer (Tensor.Mapped is false; a ReadWrite open fails with
// ErrLayout instead). Big-endian arrays fail with ErrByteOrder (ReadNPY
// converts them); object and structured dtypes with ErrDType; headers
// that disagree with the file's size with ErrTruncated; headers over
// DefaultMaxNPYHeader bytes with ErrFormat, unless MaxNPYHeader allows
// them.
func OpenNPY(path string, opts ...Option) (*File, error) {
	f, fd, size, err := openFile(path, opts)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	t, err := f.npyFile(fd, size)
	if err == nil {
		err = f.add(t)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// npyFile returns the tensor of the .npy file of size bytes open as fd and
// mapped as f: a view of the mapping, or, when the data's offset is
// misaligned for its type (a header not padded to 16 or 64 bytes, which
// NumPy reads), a copy in a Buffer, since consumers need aligned elements;
// a ReadWrite open refuses it (a copy would not write to the file).
func (f *File) npyFile(fd io.ReaderAt, size int64) (*Tensor, error) {
	r := io.NewSectionReader(fd, 0, size)
	h, err := readNPYHeaderMax(r, size, f.npyHeaderLimit())
	if err != nil {
		return nil, err
	}
	if err := h.checkSize(size); err != nil {
		return nil, err
	}
	if h.bigEndian || h.dataOffset%int64(h.dtype.Alignment()) == 0 || h.nbytes == 0 {
		return mappedNPY(f.m, h, 0, "", !f.writable)
	}
	if f.writable {
		return nil, fieldErr(ErrLayout, "header_len", h.dataOffset, fmt.Sprintf("the data at file offset %d is misaligned for %v: a copy would not write to the file", h.dataOffset, h.dtype))
	}
	return copyNPY(f, io.NewSectionReader(fd, 0, size), size, "", true)
}

// npyHeaderLen returns the header length that the preamble pre (at least
// 10 bytes, 12 for version 2.0 and 3.0) declares, and where the header
// starts; 0, 0 when pre is no .npy preamble (parseNPYHeader says why).
func npyHeaderLen(pre []byte) (hlen, start int64) {
	switch {
	case len(pre) < 10 || string(pre[:6]) != npyMagic:
	case pre[6] == 1:
		return int64(binary.LittleEndian.Uint16(pre[8:])), 10
	case len(pre) >= 12:
		return int64(binary.LittleEndian.Uint32(pre[8:])), 12
	}
	return 0, 0
}

// checkHeaderLen refuses a declared .npy header longer than limit, before
// anything of it is read: NumPy bounds headers too (max_header_size), and
// a file may claim 4 GiB.
func checkHeaderLen(hlen, limit int64) error {
	if hlen > limit {
		return fieldErr(ErrFormat, "header_len", hlen, fmt.Sprintf("over the %d-byte limit on .npy headers (NumPy's max_header_size; MaxNPYHeader raises it for trusted files)", limit))
	}
	return nil
}

// readNPYHeaderMax reads the header of the .npy of n bytes in r, refusing
// headers longer than limit bytes.
func readNPYHeaderMax(r io.ReaderAt, n, limit int64) (*npyHeader, error) {
	pre, err := readPrefix(r, 12, n)
	if err != nil {
		return nil, err
	}
	if hlen, start := npyHeaderLen(pre); start != 0 {
		if err := checkHeaderLen(hlen, limit); err != nil {
			return nil, err
		}
		hlen += start
		if hlen > 12 && hlen <= n {
			if pre, err = readPrefix(r, hlen, n); err != nil {
				return nil, err
			}
		}
	}
	return parseNPYHeader(pre, n)
}

// npyTensor parses the .npy of n bytes in r, which is at byte off of the
// mapping m, refusing a header longer than limit, and returns a mapped
// tensor of it.
func npyTensor(m *mapping, r io.ReaderAt, off, n, limit int64, name string, readOnly bool) (*Tensor, error) {
	h, err := readNPYHeaderMax(r, n, limit)
	if err != nil {
		return nil, err
	}
	if err := h.checkSize(n); err != nil {
		return nil, err
	}
	return mappedNPY(m, h, off, name, readOnly)
}

// mappedNPY returns the tensor of the .npy at byte off of the mapping m,
// whose header is h, as a view of the mapping.
func mappedNPY(m *mapping, h *npyHeader, off int64, name string, readOnly bool) (*Tensor, error) {
	if h.bigEndian {
		return nil, fieldErr(ErrByteOrder, "header.descr", h.descr, "big-endian data cannot be shared with a little-endian consumer; ReadNPY converts it")
	}
	t := newTensor(name, h.dtype, h.shape, h.strides, h.nbytes, readOnly)
	t.off = off + h.dataOffset
	return t, nil
}

// checkSize checks that a .npy of n bytes holds exactly the data its
// header describes.
func (h *npyHeader) checkSize(n int64) error {
	if n-h.dataOffset != h.nbytes {
		return fieldErr(ErrTruncated, "header.shape", h.shape, fmt.Sprintf("%v x %d bytes needs %d data bytes, the file has %d", h.dtype, h.dtype.ItemSize(), h.nbytes, n-h.dataOffset))
	}
	return nil
}

// ReadNPY reads the .npy file at path into memory outside the Go heap (a
// dlpack.Buffer) and returns a File holding that copy, in native (little-
// endian) byte order: the explicit way to open big-endian arrays. Its
// tensor is writable and not Mapped; writes do not reach the file. Buffers
// need cgo: without it ReadNPY fails with dlpack.ErrCgoRequired. Of the
// options only MaxNPYHeader applies (the copy is always writable).
func ReadNPY(path string, opts ...Option) (*File, error) {
	if err := regular(path); err != nil {
		return nil, err
	}
	fd, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, err
	}
	f := &File{writable: true}
	for _, o := range opts {
		if o.maxNPYHeader != 0 {
			f.maxNPYHeader = o.maxNPYHeader
		}
	}
	t, err := copyNPY(f, fd, st.Size(), "", false)
	if err == nil {
		err = f.add(t)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// copyNPY reads a .npy of size bytes from r into a new Buffer owned by f,
// swapping big-endian data to native order.
func copyNPY(f *File, r io.Reader, size int64, name string, readOnly bool) (*Tensor, error) {
	pre := make([]byte, 12)
	n, err := io.ReadFull(r, pre)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, err
	}
	pre = pre[:n]
	need := int64(10)
	if hlen, start := npyHeaderLen(pre); start != 0 {
		if err := checkHeaderLen(hlen, f.npyHeaderLimit()); err != nil {
			return nil, err
		}
		need = start + hlen
	}
	if need > size {
		need = int64(len(pre)) // parseNPYHeader reports the lie
	}
	if need > int64(len(pre)) {
		rest := make([]byte, need-int64(len(pre)))
		if _, err := io.ReadFull(r, rest); err != nil {
			return nil, fieldErr(ErrTruncated, "header_len", need, "the file ends inside the header")
		}
		pre = append(pre, rest...)
	}
	h, err := parseNPYHeader(pre, size)
	if err != nil {
		return nil, err
	}
	if err := h.checkSize(size); err != nil {
		return nil, err
	}
	// The preamble read may have taken data bytes already.
	head := pre[h.dataOffset:]
	buf, err := dlpack.NewBuffer[uint8]([]int64{h.nbytes})
	if err != nil {
		return nil, err
	}
	f.bufs = append(f.bufs, buf)
	data := buf.Data()
	copy(data, head)
	if testHookBeforeData != nil {
		testHookBeforeData()
	}
	if _, err := io.ReadFull(r, data[len(head):]); err != nil {
		return nil, fieldErr(ErrTruncated, "data", h.nbytes, "the data ends early: "+err.Error())
	}
	// Reading to the end also makes a zip member check its CRC.
	k, err := io.ReadFull(r, make([]byte, 1))
	switch {
	case k != 0:
		return nil, fieldErr(ErrTruncated, "data", h.nbytes, "more data than the header says")
	case err != io.EOF:
		return nil, fieldErr(ErrFormat, "data", h.nbytes, err.Error())
	}
	if h.bigEndian {
		swapBytes(data, h.dtype)
	}
	t := newTensor(name, h.dtype, h.shape, h.strides, h.nbytes, readOnly)
	t.extra().buf = buf
	return t, nil
}

// testHookBeforeData, set by tests, runs when copyNPY has read a header
// and is about to read the data.
var testHookBeforeData func()

// swapBytes reverses the bytes of every element (each half of a complex
// number on its own).
func swapBytes(b []byte, dt dlpack.DataType) {
	w := dt.ItemSize()
	if dt.Code == dlpack.CodeComplex {
		w /= 2
	}
	for i := 0; i+w <= len(b); i += w {
		e := b[i : i+w]
		for j, k := 0, w-1; j < k; j, k = j+1, k-1 {
			e[j], e[k] = e[k], e[j]
		}
	}
}

// WriteNPY writes t to w as a .npy file (format 1.0, or 2.0 for headers
// over 64 KiB) in C order: any strides, read-only or not, of every data
// type NumPy has (bool, int8..uint64, float16/32/64, complex64/128). The
// tensor is taken with dlpack.From and released before WriteNPY returns;
// the data streams to w without an intermediate copy of the whole tensor.
func WriteNPY(w io.Writer, t dlpack.Producer) error {
	f, err := dlpack.From(t)
	if err != nil {
		return err
	}
	defer f.Close()
	descr, err := npyDescr(f.DataType())
	if err == nil {
		err = checkSource(f)
	}
	if err != nil {
		return err
	}
	return writeNPYTo(w, descr, f)
}

// writeNPYTo streams f to w as a .npy file (C order) of type descr.
func writeNPYTo(w io.Writer, descr string, f dlpack.Foreign) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	if _, err := bw.Write(npyPreamble(descr, false, f.Shape())); err != nil {
		return err
	}
	if err := writeElements(bw, f); err != nil {
		return err
	}
	return bw.Flush()
}

// npyPreamble is the magic, version, length and header NumPy writes, padded
// with spaces and a newline so the data starts at a multiple of 64 bytes.
func npyPreamble(descr string, fortran bool, shape []int64) []byte {
	var sb strings.Builder
	fmt.Fprintf(&sb, "{'descr': '%s', 'fortran_order': %s, 'shape': (", descr, map[bool]string{true: "True", false: "False"}[fortran])
	for i, d := range shape {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.FormatInt(d, 10))
	}
	if len(shape) == 1 {
		sb.WriteString(",")
	}
	sb.WriteString("), }")
	hdr := sb.String()
	major, pre := byte(1), 10
	if len(hdr)+1+pre+64 > 65535 {
		major, pre = 2, 12
	}
	total := (pre + len(hdr) + 1 + 63) / 64 * 64
	hdr += strings.Repeat(" ", total-pre-len(hdr)-1) + "\n"
	out := make([]byte, pre, total)
	copy(out, npyMagic)
	out[6], out[7] = major, 0
	if major == 1 {
		binary.LittleEndian.PutUint16(out[8:], uint16(len(hdr)))
	} else {
		binary.LittleEndian.PutUint32(out[8:], uint32(len(hdr)))
	}
	return append(out, hdr...)
}
