package tensorfile

import (
	"archive/zip"
	"encoding/binary"
	"fmt"
	"io"
	"strings"

	"github.com/godlpack/dlpack"
)

// maxDeflateRatio bounds the size a deflated member may claim: deflate
// cannot compress better than about 1032:1.
const maxDeflateRatio = 1032

// OpenNPZ maps the .npz archive at path (read-only) and returns its .npy
// members as tensors named as np.load names them (the member name without
// ".npy"); members not ending in ".npy" are skipped.
//
// Which members are views of the mapping and which are copies (see
// Tensor.Mapped):
//   - stored (np.savez) members whose data offset inside the archive suits
//     the element's alignment are mapped: no copy, and their CRC is not
//     checked (that would read the data);
//   - deflated (np.savez_compressed) members are decompressed, and their
//     CRC checked, into a dlpack.Buffer per member; so are stored members
//     that are misaligned (np.savez does not align) or big-endian (copied
//     to native order).
//
// Every tensor is read-only. The archive's mapping and the copies live
// until Close and every export's release, as for any File. Copies need
// cgo: without it an archive with a member to copy fails with
// dlpack.ErrCgoRequired.
func OpenNPZ(path string) (*File, error) {
	f, fd, size, err := openFile(path, nil)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	if err := f.loadNPZ(fd, size); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func (f *File) loadNPZ(fd io.ReaderAt, size int64) error {
	zr, err := zip.NewReader(fd, size)
	if err != nil {
		return fieldErr(ErrFormat, "archive", "not a zip archive", err.Error())
	}
	for _, zf := range zr.File {
		if !strings.HasSuffix(zf.Name, ".npy") {
			continue
		}
		name := strings.TrimSuffix(zf.Name, ".npy")
		field := fmt.Sprintf("member %q", zf.Name)
		var t *Tensor
		switch zf.Method {
		case zip.Store:
			t, err = f.storedMember(fd, size, zf, name, field)
		case zip.Deflate:
			t, err = f.deflatedMember(zf, name, field)
		default:
			err = fieldErr(ErrFormat, field, zf.Method, "compression method not stored or deflated")
		}
		if err != nil {
			return wrapMember(field, err)
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

func (f *File) storedMember(fd io.ReaderAt, size int64, zf *zip.File, name, field string) (*Tensor, error) {
	off, err := zf.DataOffset()
	if err != nil {
		return nil, fieldErr(ErrFormat, field, "local header", err.Error())
	}
	n := int64(zf.CompressedSize64)
	if zf.UncompressedSize64 != zf.CompressedSize64 {
		return nil, fieldErr(ErrFormat, field, zf.UncompressedSize64, "stored member whose sizes differ")
	}
	if off < 0 || n < 0 || off > size || n > size-off {
		return nil, fieldErr(ErrTruncated, field, n, "past the end of the archive")
	}
	r := io.NewSectionReader(fd, off, n)
	h, err := readNPYHeader(r, n)
	if err != nil {
		return nil, err
	}
	if err := h.checkSize(n); err != nil {
		return nil, err
	}
	if !h.bigEndian && (off+h.dataOffset)%int64(alignOf(h.dtype)) == 0 {
		return npyTensor(f.m, r, off, n, name, true)
	}
	return copyNPY(f, r, n, name, true)
}

func (f *File) deflatedMember(zf *zip.File, name, field string) (*Tensor, error) {
	if zf.UncompressedSize64 > zf.CompressedSize64*maxDeflateRatio+1024 {
		return nil, fieldErr(ErrTruncated, field, zf.UncompressedSize64, fmt.Sprintf("claims more than deflate can expand %d bytes to", zf.CompressedSize64))
	}
	rc, err := zf.Open()
	if err != nil {
		return nil, fieldErr(ErrFormat, field, "local header", err.Error())
	}
	defer rc.Close()
	return copyNPY(f, rc, int64(zf.UncompressedSize64), name, true)
}

// alignOf is the alignment a Go element of dt needs.
func alignOf(dt dlpack.DataType) int {
	a := dt.ItemSize()
	if dt.Code == dlpack.CodeComplex {
		a /= 2
	}
	return min(max(a, 1), 8)
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
