package tensorfile

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/godlpack/dlpack"
)

// stScanner reads a safetensors JSON header: strict JSON (RFC 8259) with
// the header's schema, without reflection (encoding/json takes several
// times longer on the headers of real model files, which list hundreds or
// thousands of tensors). Like the reference implementation it ignores
// unknown fields of a tensor's entry.
//
// It holds a window of the header, not the whole of it: b is the header
// from byte base on, read from r chunk bytes at a time as the scanner
// needs them (more), and release drops what was read before a top-level
// member, so the window holds about one member and one chunk, whatever
// the header's size. Growing b keeps every index into it (and every
// slice of it) valid; only release moves them, and it is called only
// between members. Every byte read is checked for UTF-8 (utf8).
type stScanner struct {
	b     []byte
	i     int
	base  int         // the header offset of b[0]
	r     io.ReaderAt // the header's source
	at    int64       // the offset in r of the header's first byte
	n     int         // the header's length
	chunk int
	rerr  error // a read error, which ended the header early
	utf8  utf8Stream

	shape []uint64 // scratch for entry's "shape"
	offs  []uint64 // and "data_offsets"
}

// newScanner reads the header of n bytes at offset at of r, chunk bytes
// at a time.
func newScanner(r io.ReaderAt, at int64, n, chunk int) *stScanner {
	chunk = max(chunk, 1)
	return &stScanner{r: r, at: at, n: n, chunk: chunk, b: make([]byte, 0, min(n, chunk))}
}

// more reads the next chunk of the header into the window, growing it
// when full, and reports whether there was any.
func (s *stScanner) more() bool {
	read := s.base + len(s.b)
	if read == s.n || s.rerr != nil {
		return false
	}
	if len(s.b) == cap(s.b) {
		nb := make([]byte, len(s.b), min(max(2*cap(s.b), s.chunk), s.n-s.base))
		copy(nb, s.b)
		s.b = nb
	}
	p := s.b[len(s.b):min(cap(s.b), len(s.b)+s.chunk, len(s.b)+s.n-read)]
	if k, err := s.r.ReadAt(p, s.at+int64(read)); k < len(p) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		s.rerr = fieldErr(ErrTruncated, "header", fmt.Sprintf("bytes %d to %d", read, read+len(p)), "cannot be read: "+err.Error())
		return false
	}
	s.utf8.feed(p)
	s.b = s.b[:len(s.b)+len(p)]
	return true
}

// has reports whether the window holds byte i, reading more if needed.
func (s *stScanner) has() bool { return s.i < len(s.b) || s.more() }

// avail reports whether the window holds k bytes from i, reading more if
// needed.
func (s *stScanner) avail(k int) bool {
	for len(s.b)-s.i < k {
		if !s.more() {
			return false
		}
	}
	return true
}

// release drops the bytes before i from the window, once they are more
// than half of it: between top-level members, where nothing refers to
// them.
func (s *stScanner) release() {
	if s.i < cap(s.b)/2 {
		return
	}
	n := copy(s.b, s.b[s.i:])
	s.b = s.b[:n]
	s.base += s.i
	s.i = 0
}

// finish reads what is left of the header, checking it for UTF-8 as the
// whole header must be, and returns the error that stands: the header's
// invalid UTF-8 first (wherever it is), then a read error, then err.
func (s *stScanner) finish(err error) error {
	for s.more() {
		s.i = len(s.b)
		s.release()
	}
	switch {
	case !s.utf8.valid():
		return fieldErr(ErrFormat, "header", "invalid UTF-8", "the JSON header must be UTF-8")
	case s.rerr != nil:
		return s.rerr
	}
	return err
}

// rest quotes the header from i to its end, trailing spaces dropped and
// cut after n bytes ("..."), for errors. It reads the header to its end.
func (s *stScanner) rest(n int) string {
	s.avail(n)
	head := string(s.b[s.i:min(len(s.b), s.i+n)])
	s.i += len(head)
	for ; s.has(); s.i++ {
		if s.b[s.i] != ' ' {
			return head + "..."
		}
		s.release()
	}
	return strings.TrimRight(head, " ")
}

// utf8Stream checks, chunk by chunk, that a text is UTF-8: a character
// cut between two chunks is carried over to the next.
type utf8Stream struct {
	carry []byte
	bad   bool
}

func (u *utf8Stream) feed(p []byte) {
	for len(u.carry) > 0 && len(p) > 0 && !u.bad {
		u.carry = append(u.carry, p[0])
		p = p[1:]
		if utf8.FullRune(u.carry) {
			if r, n := utf8.DecodeRune(u.carry); (r == utf8.RuneError && n <= 1) || n != len(u.carry) {
				u.bad = true
			}
			u.carry = u.carry[:0]
		}
	}
	if u.bad || len(p) == 0 {
		return
	}
	cut := len(p) // where a character the next chunk completes starts
	for i := len(p) - 1; i >= 0 && i > len(p)-utf8.UTFMax; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				cut = i
			}
			break
		}
	}
	if !utf8.Valid(p[:cut]) {
		u.bad = true
	}
	u.carry = append(u.carry, p[cut:]...)
}

// valid reports whether everything fed was UTF-8, with no character cut
// at the end.
func (u *utf8Stream) valid() bool { return !u.bad && len(u.carry) == 0 }

func (s *stScanner) err(why string) error {
	return fieldErr(ErrFormat, "header", "invalid JSON", fmt.Sprintf("at byte %d: %s", s.base+s.i, why))
}

func (s *stScanner) ws() {
	for s.has() {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek skips whitespace and returns the next byte, 0 at the end.
func (s *stScanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *stScanner) expect(c byte) error {
	if s.peek() != c {
		return s.err(fmt.Sprintf("expected %q", c))
	}
	s.i++
	return nil
}

// str reads a string, decoding escapes.
func (s *stScanner) str() (string, error) {
	b, err := s.strBytes()
	return string(b), err
}

// strBytes reads a string, decoding escapes; without escapes the result is
// a slice of the header (no allocation).
func (s *stScanner) strBytes() ([]byte, error) {
	if s.peek() != '"' {
		return nil, s.err("expected a string")
	}
	s.i++
	start := s.i
	for s.has() { // fast path: no escapes
		c := s.b[s.i]
		if c == '"' {
			v := s.b[start:s.i]
			s.i++
			return v, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return nil, s.err("control character in a string")
		}
		s.i++
	}
	buf := append([]byte(nil), s.b[start:s.i]...)
	for s.has() {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return buf, nil
		case c < 0x20:
			return nil, s.err("control character in a string")
		case c != '\\':
			buf = append(buf, c)
			s.i++
			continue
		}
		if !s.avail(2) {
			return nil, s.err("unterminated escape")
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return nil, s.err("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				// Only a high surrogate followed by a low one names a
				// character; the reference parser (serde_json) refuses
				// the file otherwise, where encoding/json would read
				// U+FFFD: another name than the file's.
				at := s.i - 6
				r2 := rune(-1)
				if r < 0xdc00 && s.avail(2) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
					s.i += 2
					if r2, ok = s.hex4(); !ok {
						return nil, s.err("bad \\u escape")
					}
				}
				d := utf16.DecodeRune(r, r2)
				if d == utf8.RuneError {
					return nil, fieldErr(ErrFormat, stringField, truncate(string(s.b[start-1:min(s.i, at+12)]), 80), fmt.Sprintf("at byte %d: an unpaired UTF-16 surrogate escape (a high one, \\ud800-\\udbff, must be followed by a low one, \\udc00-\\udfff): it names no character", s.base+at))
				}
				r = d
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return nil, s.err("bad escape")
		}
	}
	return nil, s.err("unterminated string")
}

// stringField is the field of an error about a string's text (an
// unpaired surrogate escape) until the reader of the string names it
// (inString).
const stringField = "header string"

// inString names the string err (from strBytes) is about, when it is a
// string's text; other errors are returned as they are.
func inString(err error, field string) error {
	if fe, ok := err.(*dlpack.FieldError); ok && fe.Field == stringField {
		return renamed(err, field)
	}
	return err
}

func (s *stScanner) hex4() (rune, bool) {
	if !s.avail(4) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(s.b[s.i:s.i+4]), 16, 32)
	if err != nil || s.b[s.i] == '+' || s.b[s.i] == '-' {
		return 0, false
	}
	s.i += 4
	return rune(v), true
}

// number reads a JSON number (its text is what it passed over).
func (s *stScanner) number() error {
	s.ws()
	if s.has() && s.b[s.i] == '-' {
		s.i++
	}
	digits := func() int {
		j := s.i
		for s.has() && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
			s.i++
		}
		return s.i - j
	}
	switch {
	case s.has() && s.b[s.i] == '0':
		s.i++
	case digits() == 0:
		return s.err("expected a number")
	}
	if s.has() && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return s.err("bad number")
		}
	}
	if s.has() && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.has() && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return s.err("bad number")
		}
	}
	return nil
}

// literal reads true, false or null.
func (s *stScanner) literal() (string, error) {
	s.ws()
	for _, w := range []string{"true", "false", "null"} {
		if s.avail(len(w)) && string(s.b[s.i:s.i+len(w)]) == w {
			s.i += len(w)
			return w, nil
		}
	}
	return "", s.err("expected a value")
}

// skip reads and drops any value, nested at most depth levels.
func (s *stScanner) skip(depth int) error {
	if depth > 64 {
		return s.err("nested too deeply")
	}
	switch s.peek() {
	case '"':
		_, err := s.strBytes()
		return err
	case '{':
		s.i++
		if s.peek() == '}' {
			s.i++
			return nil
		}
		for {
			if _, err := s.strBytes(); err != nil {
				return err
			}
			if err := s.expect(':'); err != nil {
				return err
			}
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			if s.peek() == ',' {
				s.i++
				continue
			}
			return s.expect('}')
		}
	case '[':
		s.i++
		if s.peek() == ']' {
			s.i++
			return nil
		}
		for {
			if err := s.skip(depth + 1); err != nil {
				return err
			}
			if s.peek() == ',' {
				s.i++
				continue
			}
			return s.expect(']')
		}
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return s.number()
	}
	_, err := s.literal()
	return err
}

// object calls member for each key of an object (the scanner then at its
// value); member must read the value. key is a slice of the window,
// valid until the next release.
func (s *stScanner) object(member func(key []byte) error) error {
	return s.members(false, member)
}

// members is object, releasing the window before each member when
// release is set (the top-level object's, between which nothing refers
// to the window).
func (s *stScanner) members(release bool, member func(key []byte) error) error {
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		if release {
			s.ws()
			s.release()
		}
		k, err := s.strBytes()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		if err := member(k); err != nil {
			return err
		}
		if s.peek() == ',' {
			s.i++
			continue
		}
		return s.expect('}')
	}
}

// uints reads an array of numbers, or null (nil). Each must be a
// non-negative integer literal; bad holds the first that is not (a
// fraction, an exponent, a sign, or over 2^64-1), and then the values are
// not meaningful.
func (s *stScanner) uints(buf []uint64) (vals []uint64, bad string, err error) {
	if s.peek() == 'n' {
		_, err := s.literal()
		return nil, "", err
	}
	if err := s.expect('['); err != nil {
		return nil, "", err
	}
	vals = buf[:0]
	if vals == nil {
		vals = make([]uint64, 0, 4)
	}
	if s.peek() == ']' {
		s.i++
		return vals, "", nil
	}
	for {
		if c := s.peek(); c != '-' && (c < '0' || c > '9') {
			return nil, "", s.err("expected a number")
		}
		start := s.i
		if err := s.number(); err != nil {
			return nil, "", err
		}
		v, ok := uint64(0), true
		for _, c := range s.b[start:s.i] {
			if c < '0' || c > '9' || v > (1<<64-1-uint64(c-'0'))/10 {
				ok = false
				break
			}
			v = v*10 + uint64(c-'0')
		}
		if !ok && bad == "" {
			bad = string(s.b[start:s.i])
		}
		vals = append(vals, v)
		if s.peek() == ',' {
			s.i++
			continue
		}
		return vals, bad, s.expect(']')
	}
}

// metadata reads the __metadata__ object of strings (or null).
func (s *stScanner) metadata() (map[string]string, error) {
	if s.peek() == 'n' {
		_, err := s.literal()
		return nil, err
	}
	if s.peek() != '{' {
		return nil, fieldErr(ErrFormat, "__metadata__", "invalid", "must be an object of strings")
	}
	m := map[string]string{}
	err := s.object(func(k []byte) error {
		if s.peek() != '"' {
			return fieldErr(ErrFormat, "__metadata__", strconv.Quote(string(k)), "must be an object of strings: the value is not a string")
		}
		v, err := s.str()
		if err != nil {
			return inString(err, "__metadata__["+strconv.Quote(string(k))+"]")
		}
		m[string(k)] = v
		return nil
	})
	return m, inString(err, "__metadata__ key")
}

// entry reads one tensor's {"dtype", "shape", "data_offsets"} into t,
// named already, its shape taken from dims, in a file whose data section
// starts at dataBase.
func (s *stScanner) entry(t *Tensor, dims *dimArena, dataBase int64) error {
	field := func(suffix string) string { return strconv.Quote(t.name) + suffix }
	if s.peek() != '{' {
		return fieldErr(ErrFormat, field(""), "invalid", "must be {\"dtype\", \"shape\", \"data_offsets\"}")
	}
	var dtype string
	var hasDType bool
	var shape []uint64
	var offs []uint64
	var seen [3]bool
	err := s.object(func(k []byte) error {
		for i, known := range [3]string{"dtype", "shape", "data_offsets"} {
			if string(k) == known {
				if seen[i] {
					return fieldErr(ErrFormat, field(""), known, "a field appears twice")
				}
				seen[i] = true
			}
		}
		switch string(k) {
		case "dtype":
			if s.peek() == 'n' {
				_, err := s.literal()
				return err
			}
			if s.peek() != '"' {
				return fieldErr(ErrFormat, field(".dtype"), "invalid", "must be a string")
			}
			v, err := s.strBytes()
			if err != nil {
				return inString(err, field(".dtype"))
			}
			dt, ok := safetensorsNames[string(v)] // interned: no allocation
			if !ok {
				dt = string(v)
			}
			dtype, hasDType = dt, true
			return nil
		case "shape":
			v, bad, err := s.uints(s.shape)
			switch {
			case err != nil:
				return err
			case bad != "" && isDigits(bad):
				return fieldErr(ErrLayout, field(".shape"), bad, "dimension overflows int64")
			case bad != "":
				return fieldErr(ErrFormat, field(".shape"), bad, "dimensions must be non-negative integers")
			}
			shape, s.shape = v, v
			return nil
		case "data_offsets":
			v, bad, err := s.uints(s.offs)
			switch {
			case err != nil:
				return err
			case bad != "":
				return fieldErr(ErrTruncated, field(".data_offsets"), bad, "offsets must be non-negative integers inside the file")
			}
			offs, s.offs = v, v
			return nil
		}
		if err := s.skip(0); err != nil {
			return inString(err, field("."+string(k)))
		}
		return nil
	})
	if err != nil {
		return inString(err, field(" key"))
	}
	return checkEntry(t, dims, dataBase, dtype, hasDType, shape, offs)
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}
