package tensorfile

import (
	"archive/zip"
	"compress/bzip2"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strings"
	"sync"
	"unsafe"

	"github.com/godlpack/dlpack"
)

// Bounds on the uncompressed size a member may claim for its compressed
// size (plus 1024 bytes), so a small archive cannot make OpenNPZ allocate
// what its data could never fill:
//   - deflate cannot compress better than about 1032:1;
//   - a bzip2 block costs at least 19 bytes (magic, CRC, origPtr, symbol
//     map, table counts) and expands to at most 45,899,235 bytes;
//   - LZMA codes at best a 273-byte repeat in 14 binary decisions of at
//     least 0.022 bits each (probabilities saturate at 2017/2048), about
//     7100:1 (10^8 zero bytes compress 7051:1).
const (
	maxDeflateRatio = 1032
	maxBzip2Ratio   = 45899235/19 + 1
	maxLZMARatio    = 8000
)

// SkipMappedCRC makes OpenNPZ map its aligned stored members without
// reading them, so without checking their CRC-32 (Tensor.CRCChecked is
// then false for them): opening then reads no tensor data at all, however
// large the archive. Use it to list an archive, or for archives whose
// bytes are checked another way; a flipped byte in a member it skips is
// handed to consumers as it is. Copied members (misaligned, big-endian,
// compressed) are read anyway, so always checked. OpenNPY and
// OpenSafetensors ignore it: their formats have no checksums.
func SkipMappedCRC() Option { return Option{skipMappedCRC: true} }

// LazyMappedCRC makes OpenNPZ map its aligned stored members without
// reading them and check each one's CRC-32 on its first use instead: the
// first DescribeTensor (so dlpack.From, DLPack and the writers) or CopyTo
// of the member reads it once through the mapping, as np.load reads a
// member of an NpzFile when it is asked for. Opening then reads no tensor
// data, however large the archive, and no unchecked byte reaches a
// consumer: a member whose bytes fail fails that use, and every later
// one, with ErrChecksum naming the member and both CRC-32s (the other
// members serve on). Tensor.CRCChecked turns true once the member's check
// has passed. Copied members are checked at open, as without it. It
// cannot be given with SkipMappedCRC.
func LazyMappedCRC() Option { return Option{lazyMappedCRC: true} }

// crcMode is how OpenNPZ checks the mapped members.
type crcMode int

const (
	crcAtOpen crcMode = iota
	crcSkip
	crcLazy
)

// OpenNPZ maps the .npz archive at path (read-only) and returns its .npy
// members as tensors named as np.load names them (the member name without
// ".npy", decoded as Python's zipfile decodes it: UTF-8 when the member
// is flagged so, CP437 otherwise); members not ending in ".npy" are
// skipped. The file must start as a zip archive does, as np.load
// requires (so no self-extractor stub), and each member's local header
// must agree with the central directory (name, method, CRC-32 and sizes,
// or those of its data descriptor).
//
// Which members are views of the mapping and which are copies (see
// Tensor.Mapped):
//   - stored (np.savez) members whose data offset inside the archive suits
//     the element's alignment are mapped: no copy. Their CRC-32 is checked
//     as the archive opens, by reading each once through the mapping
//     (so opening costs one read of the archive), unless the
//     LazyMappedCRC option defers each member's check to its first use
//     (as np.load checks a member when it is read) or SkipMappedCRC skips
//     it;
//   - stored members that are misaligned (np.savez does not align) or
//     big-endian (copied to native order), and deflated
//     (np.savez_compressed), bzip2 and LZMA members (zipfile.ZIP_BZIP2,
//     zipfile.ZIP_LZMA) are read, decompressed and CRC-checked into a
//     dlpack.Buffer per member.
//
// Every member's CRC-32 is checked unless SkipMappedCRC says otherwise
// (Tensor.CRCChecked tells). A member whose bytes fail it fails the open
// with ErrChecksum naming the member and both CRC-32s, as np.load fails
// with BadZipFile (with LazyMappedCRC, a mapped member fails its uses
// instead).
//
// The options accepted are SkipMappedCRC, LazyMappedCRC and
// MaxNPYHeader: the archive is mapped read-only (a write would leave the
// member's CRC stale), and every tensor is read-only. The archive's mapping and the copies live until Close and
// every export's release, as for any File. Copies need cgo: without it an
// archive with a member to copy fails with dlpack.ErrCgoRequired.
func OpenNPZ(path string, opts ...Option) (*File, error) {
	var skip, lazy bool
	for _, o := range opts {
		if o.writable {
			return nil, errors.New("tensorfile: OpenNPZ maps read-only; ReadWrite is not an option for it")
		}
		skip, lazy = skip || o.skipMappedCRC, lazy || o.lazyMappedCRC
	}
	mode := crcAtOpen
	switch {
	case skip && lazy:
		return nil, errors.New("tensorfile: OpenNPZ: SkipMappedCRC and LazyMappedCRC cannot both be given")
	case skip:
		mode = crcSkip
	case lazy:
		mode = crcLazy
	}
	f, fd, size, err := openFile(path, opts)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	if err := f.loadNPZ(fd, size, mode); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// CRCChecked reports whether the bytes of the tensor's .npz member have
// been checked against the CRC-32 of its archive, and matched: true for
// every member once the file is open, unless OpenNPZ was given
// SkipMappedCRC, which leaves the mapped ones unchecked, or
// LazyMappedCRC, which checks each mapped one on its first use; false for
// .npy and safetensors tensors (formats without checksums).
func (t *Tensor) CRCChecked() bool { return t.x != nil && t.x.crcOK.Load() }

// lazyCRC is the pending check of a mapped member (LazyMappedCRC).
type lazyCRC struct {
	once   sync.Once
	err    error // the outcome, once done
	e      *zipEntry
	off, n int64 // the member's bytes in the archive
}

// checkCRC runs the tensor's pending CRC-32 check, once, and returns its
// outcome; nil for a tensor with none pending. The caller holds the
// File's read lock, so the mapping is there.
func (t *Tensor) checkCRC() error {
	if t.x == nil || t.x.lazy == nil {
		return nil
	}
	l := t.x.lazy
	l.once.Do(func() {
		if l.err = l.e.checkMapped(t.file.m, l.off, l.n); l.err == nil {
			t.x.crcOK.Store(true)
		}
	})
	return l.err
}

// checkMapped checks the n bytes at off in the mapping m, the member e's,
// against its CRC-32, reading them through the mapping: a page the file
// lost to a truncation fails with ErrTruncated, not a fault.
func (e *zipEntry) checkMapped(m *mapping, off, n int64) error {
	b := m.data[off : off+n]
	var sum uint32
	err := guardMapped(e.field+" data", m, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)), func() error {
		sum = crc32.Update(0, crc32.IEEETable, b)
		return nil
	})
	if err == nil && sum != e.crc {
		err = e.checksumErr(sum)
	}
	return err
}

func (f *File) loadNPZ(fd io.ReaderAt, size int64, mode crcMode) error {
	es, err := readZipDir(fd, size)
	if err != nil {
		return err
	}
	for i := range es {
		e := &es[i]
		if !strings.HasSuffix(e.name, ".npy") {
			continue
		}
		if err := e.checkLocal(fd, size); err != nil {
			return err
		}
		name := strings.TrimSuffix(e.name, ".npy")
		if _, dup := f.byName[name]; dup {
			// zipfile keeps the last entry of a name, so np.load reads
			// the last member: either way one of them would be hidden.
			return fieldErr(ErrFormat, e.field+" name", name, "another member of the archive has this name (np.load reads the last of them)")
		}
		var t *Tensor
		if e.method == zipStore {
			t, err = f.storedMember(fd, e, name, mode)
		} else {
			t, err = f.compressedMember(fd, e, name)
		}
		if err != nil {
			return wrapMember(e.field, err)
		}
		if err := f.add(t); err != nil {
			return err
		}
	}
	return nil
}

// wrapMember prefixes the field of a member's error with the member.
func wrapMember(field string, err error) error {
	if fe, ok := err.(*dlpack.FieldError); ok && !strings.HasPrefix(fe.Field, "member ") {
		c := *fe
		c.Field = field + " " + fe.Field
		return &c
	}
	return err
}

func (f *File) storedMember(fd io.ReaderAt, e *zipEntry, name string, mode crcMode) (*Tensor, error) {
	if e.usize != e.csize {
		return nil, zipErr(e.field+" uncompressed size", e.usize, fmt.Sprintf("a stored member whose compressed size is %d", e.csize))
	}
	off, n := e.dataOff, int64(e.csize) // checkLocal keeps them inside the archive
	r := io.NewSectionReader(fd, off, n)
	h, err := readNPYHeaderMax(r, n, f.npyHeaderLimit())
	if err == nil {
		err = h.checkSize(n)
	}
	if err != nil {
		return nil, e.orChecksum(err, io.NewSectionReader(fd, off, n), 0)
	}
	if h.bigEndian || (off+h.dataOffset)%int64(h.dtype.Alignment()) != 0 {
		return f.copyMember(io.NewSectionReader(fd, off, n), e, name)
	}
	t, err := npyTensor(f.m, r, off, n, f.npyHeaderLimit(), name, true)
	if err != nil || mode == crcSkip {
		return t, err
	}
	if mode == crcLazy {
		t.extra().lazy = &lazyCRC{e: e, off: off, n: n}
		return t, nil
	}
	if err := e.checkMapped(f.m, off, n); err != nil {
		return nil, err
	}
	t.extra().crcOK.Store(true)
	return t, nil
}

// compressedMember decompresses e into a Buffer.
func (f *File) compressedMember(fd io.ReaderAt, e *zipEntry, name string) (*Tensor, error) {
	var ratio uint64
	var method string
	switch e.method {
	case zipDeflate:
		ratio, method = maxDeflateRatio, "deflate"
	case zipBzip2:
		ratio, method = maxBzip2Ratio, "bzip2"
	case zipLZMA:
		ratio, method = maxLZMARatio, "LZMA"
	default:
		return nil, zipErr(e.field+" method", e.method, "compression method not stored (0), deflate (8), bzip2 (12) or LZMA (14)")
	}
	if e.csize > (1<<63)/ratio || e.usize > e.csize*ratio+1024 {
		return nil, fieldErr(ErrTruncated, e.field+" uncompressed size", e.usize, fmt.Sprintf("claims more than %s can expand %d bytes to", method, e.csize))
	}
	open := func() (io.Reader, error) {
		src := io.NewSectionReader(fd, e.dataOff, int64(e.csize))
		switch e.method {
		case zipDeflate:
			return flate.NewReader(src), nil
		case zipBzip2:
			return bzip2.NewReader(src), nil
		default:
			return newZipLZMAReader(src, e)
		}
	}
	r, err := open()
	if err != nil {
		return nil, err
	}
	return f.copyMember(r, e, name)
}

// copyMember reads the .npy of e, whose bytes r yields, into a Buffer,
// checking their CRC-32.
func (f *File) copyMember(r io.Reader, e *zipEntry, name string) (*Tensor, error) {
	cr := &crcReader{r: r}
	t, err := copyNPY(f, cr, int64(e.usize), name, true)
	if err == nil && cr.sum != e.crc {
		err = e.checksumErr(cr.sum)
	}
	if err != nil {
		if cr.err != nil && !errors.Is(err, ErrChecksum) {
			return nil, e.streamErr(cr.err)
		}
		return nil, e.orChecksum(err, cr, cr.n)
	}
	t.extra().crcOK.Store(true)
	return t, nil
}

// streamErr is the error of a decompressor that failed on e's data.
func (e *zipEntry) streamErr(err error) error {
	if _, ok := err.(*dlpack.FieldError); ok {
		return err
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return fieldErr(ErrTruncated, e.field+" compressed data", e.csize, "ends early: "+err.Error())
	}
	return zipErr(e.field+" compressed data", e.csize, err.Error())
}

// orChecksum reads the rest of a member's bytes (of which r yields those
// after the first done) and returns an ErrChecksum error if they fail the
// member's CRC-32, else err: a member that fails its CRC reports that,
// whatever else looks wrong in it.
func (e *zipEntry) orChecksum(err error, r io.Reader, done uint64) error {
	if errors.Is(err, ErrChecksum) {
		return err
	}
	cr, ok := r.(*crcReader)
	if !ok {
		cr = &crcReader{r: r}
	}
	if done > e.usize {
		return err
	}
	if _, cerr := io.Copy(io.Discard, io.LimitReader(cr, int64(e.usize-done)+1)); cerr != nil || cr.n != e.usize {
		if cr.err != nil { // a decompressor's error is nearer the cause
			return e.streamErr(cr.err)
		}
		return err // unreadable: err says why
	}
	if cr.sum != e.crc {
		return e.checksumErr(cr.sum)
	}
	return err
}

func (e *zipEntry) checksumErr(got uint32) error {
	return fieldErr(ErrChecksum, e.field+" CRC-32", fmt.Sprintf("0x%08x", got), fmt.Sprintf("the archive records 0x%08x", e.crc))
}

// crcReader computes the CRC-32 of what it reads, and keeps the first
// error other than io.EOF.
type crcReader struct {
	r   io.Reader
	sum uint32
	n   uint64
	err error
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.sum = crc32.Update(c.sum, crc32.IEEETable, p[:n])
	c.n += uint64(n)
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// WriteNPZ writes tensors to w as a .npz archive, each as member
// Name+".npy" in C order (WriteNPY's format and dtypes). With compress the
// members are deflated (np.savez_compressed); without, they are stored and
// padded (an extra field in the local header) so every member's data
// starts 64-byte aligned in the archive, which lets OpenNPZ map all of
// them. Each tensor is taken with dlpack.From and released before its
// member is done.
func WriteNPZ(w io.Writer, tensors []Named, compress bool) error {
	cw := &countWriter{w: w}
	zw := zip.NewWriter(cw)
	for _, nt := range tensors {
		if err := writeMember(zw, cw, nt, compress); err != nil {
			return err
		}
	}
	return zw.Close()
}

func writeMember(zw *zip.Writer, cw *countWriter, nt Named, compress bool) error {
	f, err := dlpack.From(nt.Tensor)
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
	fh := &zip.FileHeader{Name: nt.Name + ".npy", Method: zip.Store}
	if compress {
		fh.Method = zip.Deflate
	} else {
		if err := zw.Flush(); err != nil {
			return err
		}
		// The local header is 30 bytes, the name, then the extra field;
		// the .npy preamble is a multiple of 64 bytes.
		at := cw.n + 30 + int64(len(fh.Name)) + 4
		pad := (64 - at%64) % 64
		fh.Extra = make([]byte, 4+pad)
		binary.LittleEndian.PutUint16(fh.Extra, 0x7061) // a private padding field
		binary.LittleEndian.PutUint16(fh.Extra[2:], uint16(pad))
	}
	mw, err := zw.CreateHeader(fh)
	if err != nil {
		return err
	}
	return writeNPYTo(mw, descr, f)
}
