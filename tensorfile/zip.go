package tensorfile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"unicode/utf8"
)

// This file reads the directory of a zip archive the way Python's zipfile
// (what numpy.load uses) reads it: the end record found as zipfile finds
// it, names decoded as CP437 unless general purpose bit 11 says UTF-8, and
// every member's local header checked against the central directory
// before its data is used. archive/zip hides the local header's offset,
// so it cannot do the last part.

const (
	zipLocalSig      = 0x04034b50
	zipCentralSig    = 0x02014b50
	zipEndSig        = 0x06054b50
	zip64LocatorSig  = 0x07064b50
	zip64EndSig      = 0x06064b50
	zipDescriptorSig = 0x08074b50

	zipLocalLen   = 30
	zipCentralLen = 46
	zipEndLen     = 22
	zip64LocLen   = 20
	zip64EndLen   = 56

	zipFlagEncrypted  = 1 << 0
	zipFlagEOSMarker  = 1 << 1 // LZMA: the stream ends with an end marker
	zipFlagDescriptor = 1 << 3
	zipFlagPatched    = 1 << 5
	zipFlagStrong     = 1 << 6
	zipFlagUTF8       = 1 << 11

	zipStore   = 0
	zipDeflate = 8
	zipBzip2   = 12
	zipLZMA    = 14

	// zipMaxExtract is the highest "version needed to extract" zipfile
	// accepts (6.3).
	zipMaxExtract = 63
)

// zipEntry is one member of an archive, as its central directory lists
// it; dataOff is set by checkLocal.
type zipEntry struct {
	name      string // decoded, cut at a NUL as zipfile cuts it
	rawName   string // decoded, not cut: what the local header must say
	flags     uint16
	method    uint16
	crc       uint32
	csize     uint64
	usize     uint64
	headerOff int64
	dataOff   int64
	field     string // `member "name"`, for errors
}

// zipName decodes a member name as zipfile does: UTF-8 when flag bit 11
// is set, else CP437.
func zipName(b []byte, flags uint16) (string, bool) {
	if flags&zipFlagUTF8 != 0 {
		return string(b), utf8.Valid(b)
	}
	r := make([]rune, len(b))
	for i, c := range b {
		if c < 0x80 {
			r[i] = rune(c)
		} else {
			r[i] = cp437[c-0x80]
		}
	}
	return string(r), true
}

// cp437 is the upper half of code page 437 (the lower half is ASCII).
var cp437 = []rune("ÇüéâäàåçêëèïîìÄÅ" +
	"ÉæÆôöòûùÿÖÜ¢£¥₧ƒ" +
	"áíóúñÑªº¿⌐¬½¼¡«»" +
	"░▒▓│┤╡╢╖╕╣║╗╝╜╛┐" +
	"└┴┬├─┼╞╟╚╔╩╦╠═╬╧" +
	"╨╤╥╙╘╒╓╫╪┘┌█▄▌▐▀" +
	"αßΓπΣσµτΦΘΩδ∞φε∩" +
	"≡±≥≤⌠⌡÷≈°∙·√ⁿ²■\u00a0")

func zipErr(field string, value any, why string) error {
	return fieldErr(ErrFormat, field, value, why)
}

// readZipDir reads the central directory of the archive of size bytes in
// r.
func readZipDir(r io.ReaderAt, size int64) ([]zipEntry, error) {
	// np.load takes a file for an archive only if it starts as one (a
	// local header, or the end record of an empty archive).
	magic := make([]byte, 4)
	if _, err := r.ReadAt(magic, 0); err != nil || string(magic) != "PK\x03\x04" && string(magic) != "PK\x05\x06" {
		return nil, zipErr("archive", fmt.Sprintf("%q", magic), "does not start as a zip archive (PK\\x03\\x04), as np.load requires")
	}
	// The end record: the last "PK\x05\x06" in the last 64 KiB + 22 bytes
	// (the comment may be up to 65535 bytes long).
	tail := min(size, zipEndLen+65535)
	buf := make([]byte, tail)
	if _, err := r.ReadAt(buf, size-tail); err != nil && err != io.EOF {
		return nil, zipErr("archive", "end of central directory", err.Error())
	}
	at := len(buf) - zipEndLen // zipfile's first guess: no comment
	if at < 0 || string(buf[at:at+4]) != "PK\x05\x06" || buf[len(buf)-2] != 0 || buf[len(buf)-1] != 0 {
		at = bytes.LastIndex(buf, []byte("PK\x05\x06"))
	}
	if at < 0 || len(buf)-at < zipEndLen {
		return nil, zipErr("archive", "no end of central directory record", "not a zip archive")
	}
	end := buf[at : at+zipEndLen]
	endPos := size - tail + int64(at)
	disk, cdDisk := binary.LittleEndian.Uint16(end[4:]), binary.LittleEndian.Uint16(end[6:])
	cdSize := uint64(binary.LittleEndian.Uint32(end[12:]))
	cdOff := uint64(binary.LittleEndian.Uint32(end[16:]))
	if disk != 0 || cdDisk != 0 {
		return nil, zipErr("archive disk number", disk, "archives spanning several disks are not supported")
	}
	recLen := int64(0) // zip64 records between the directory and the end record
	if endPos >= zip64LocLen+zip64EndLen {
		loc := make([]byte, zip64LocLen)
		if _, err := r.ReadAt(loc, endPos-zip64LocLen); err == nil && binary.LittleEndian.Uint32(loc) == zip64LocatorSig {
			if d, n := binary.LittleEndian.Uint32(loc[4:]), binary.LittleEndian.Uint32(loc[16:]); d != 0 || n > 1 {
				return nil, zipErr("archive zip64 disk count", n, "archives spanning several disks are not supported")
			}
			e64 := make([]byte, zip64EndLen)
			if _, err := r.ReadAt(e64, endPos-zip64LocLen-zip64EndLen); err == nil && binary.LittleEndian.Uint32(e64) == zip64EndSig {
				cdSize = binary.LittleEndian.Uint64(e64[40:])
				cdOff = binary.LittleEndian.Uint64(e64[48:])
				recLen = zip64LocLen + zip64EndLen
			}
		}
	}
	// Bytes prepended to the archive shift every offset, as zipfile allows.
	if cdSize > uint64(endPos) || cdOff > uint64(endPos) {
		return nil, zipErr("archive central directory offset", cdOff, fmt.Sprintf("with size %d, past the end record at %d", cdSize, endPos))
	}
	concat := endPos - recLen - int64(cdSize) - int64(cdOff)
	start := int64(cdOff) + concat
	if start < 0 || concat < 0 {
		return nil, zipErr("archive central directory offset", cdOff, fmt.Sprintf("%d bytes long, it does not end at the end record (%d)", cdSize, endPos-recLen))
	}
	cd := make([]byte, cdSize)
	if _, err := r.ReadAt(cd, start); err != nil {
		return nil, fieldErr(ErrTruncated, "archive central directory", cdSize, err.Error())
	}
	var es []zipEntry
	for len(cd) > 0 {
		if len(cd) < zipCentralLen || binary.LittleEndian.Uint32(cd) != zipCentralSig {
			return nil, zipErr(fmt.Sprintf("archive central directory entry %d", len(es)), fmt.Sprintf("% x", cd[:min(len(cd), 4)]), "not a central directory entry")
		}
		h := cd[:zipCentralLen]
		nl := int(binary.LittleEndian.Uint16(h[28:]))
		xl := int(binary.LittleEndian.Uint16(h[30:]))
		cl := int(binary.LittleEndian.Uint16(h[32:]))
		if zipCentralLen+nl+xl+cl > len(cd) {
			return nil, fieldErr(ErrTruncated, fmt.Sprintf("archive central directory entry %d", len(es)), zipCentralLen+nl+xl+cl, "longer than the central directory")
		}
		e := zipEntry{
			flags:     binary.LittleEndian.Uint16(h[8:]),
			method:    binary.LittleEndian.Uint16(h[10:]),
			crc:       binary.LittleEndian.Uint32(h[16:]),
			csize:     uint64(binary.LittleEndian.Uint32(h[20:])),
			usize:     uint64(binary.LittleEndian.Uint32(h[24:])),
			headerOff: int64(binary.LittleEndian.Uint32(h[42:])),
		}
		raw := cd[zipCentralLen : zipCentralLen+nl]
		name, ok := zipName(raw, e.flags)
		e.field = fmt.Sprintf("member %q", name)
		if !ok {
			return nil, zipErr(e.field+" name", fmt.Sprintf("%q", raw), "flagged UTF-8 (bit 11) but not valid UTF-8")
		}
		e.rawName, e.name = name, name
		if i := bytes.IndexByte(raw, 0); i >= 0 {
			e.name, _ = zipName(raw[:i], e.flags)
		}
		if v := h[6]; v > zipMaxExtract {
			return nil, zipErr(e.field+" version needed to extract", fmt.Sprintf("%d.%d", v/10, v%10), "newer than 6.3")
		}
		if err := e.zip64(cd[zipCentralLen+nl:zipCentralLen+nl+xl], true); err != nil {
			return nil, err
		}
		e.headerOff += concat
		es = append(es, e)
		cd = cd[zipCentralLen+nl+xl+cl:]
	}
	return es, nil
}

// zip64 reads the zip64 extra fields of extra into the sizes (and, in the
// central directory, the header offset) that are saturated.
func (e *zipEntry) zip64(extra []byte, central bool) error {
	for len(extra) >= 4 {
		tag := binary.LittleEndian.Uint16(extra)
		n := int(binary.LittleEndian.Uint16(extra[2:]))
		if 4+n > len(extra) {
			return zipErr(fmt.Sprintf("%s extra field 0x%04x size", e.field, tag), n, fmt.Sprintf("past the end of the %d-byte extra data", len(extra)))
		}
		if tag == 0x0001 {
			d := extra[4 : 4+n]
			next := func(what string) (uint64, error) {
				if len(d) < 8 {
					return 0, zipErr(e.field+" zip64 extra field", fmt.Sprintf("% x", extra[4:4+n]), what+" missing")
				}
				v := binary.LittleEndian.Uint64(d)
				d = d[8:]
				return v, nil
			}
			var err error
			if e.usize == 0xffffffff {
				if e.usize, err = next("uncompressed size"); err != nil {
					return err
				}
			}
			if e.csize == 0xffffffff {
				if e.csize, err = next("compressed size"); err != nil {
					return err
				}
			}
			if central && e.headerOff == 0xffffffff {
				v, err := next("local header offset")
				if err != nil {
					return err
				}
				if v > 1<<62 {
					return zipErr(e.field+" local header offset", v, "past any file")
				}
				e.headerOff = int64(v)
			}
		}
		extra = extra[4+n:]
	}
	return nil
}

// checkLocal reads e's local header and checks it against the central
// directory (name, method, CRC-32 and sizes; those of the data descriptor
// for a member written with one), then sets e.dataOff.
func (e *zipEntry) checkLocal(r io.ReaderAt, size int64) error {
	for _, f := range []struct {
		bit uint16
		why string
	}{{zipFlagEncrypted, "encrypted"}, {zipFlagPatched, "compressed patched data"}, {zipFlagStrong, "strong encryption"}} {
		if e.flags&f.bit != 0 {
			return zipErr(e.field+" flags", fmt.Sprintf("0x%04x", e.flags), f.why+" members are not supported")
		}
	}
	if e.headerOff < 0 || e.headerOff > size-zipLocalLen {
		return fieldErr(ErrTruncated, e.field+" local header offset", e.headerOff, fmt.Sprintf("past the end of the %d-byte archive", size))
	}
	h := make([]byte, zipLocalLen)
	if _, err := r.ReadAt(h, e.headerOff); err != nil {
		return fieldErr(ErrTruncated, e.field+" local header", e.headerOff, err.Error())
	}
	if binary.LittleEndian.Uint32(h) != zipLocalSig {
		return zipErr(e.field+" local header", fmt.Sprintf("% x", h[:4]), fmt.Sprintf("no local header signature at offset %d", e.headerOff))
	}
	flags := binary.LittleEndian.Uint16(h[6:])
	nl := int64(binary.LittleEndian.Uint16(h[26:]))
	xl := int64(binary.LittleEndian.Uint16(h[28:]))
	e.dataOff = e.headerOff + zipLocalLen + nl + xl
	if e.dataOff > size {
		return fieldErr(ErrTruncated, e.field+" local header", nl+xl, "name and extra field past the end of the archive")
	}
	nx := make([]byte, nl+xl)
	if _, err := r.ReadAt(nx, e.headerOff+zipLocalLen); err != nil {
		return fieldErr(ErrTruncated, e.field+" local header", nl+xl, err.Error())
	}
	if name, ok := zipName(nx[:nl], flags); !ok || name != e.rawName {
		return zipErr(e.field+" local header name", fmt.Sprintf("%q", nx[:nl]), fmt.Sprintf("differs from the central directory's %q", e.rawName))
	}
	if m := binary.LittleEndian.Uint16(h[8:]); m != e.method {
		return zipErr(e.field+" local header method", m, fmt.Sprintf("differs from the central directory's %d", e.method))
	}
	if e.csize > uint64(size-e.dataOff) {
		return fieldErr(ErrTruncated, e.field+" compressed size", e.csize, fmt.Sprintf("past the end of the archive (data at %d of %d bytes)", e.dataOff, size))
	}
	loc := zipEntry{
		field: e.field,
		crc:   binary.LittleEndian.Uint32(h[14:]),
		csize: uint64(binary.LittleEndian.Uint32(h[18:])),
		usize: uint64(binary.LittleEndian.Uint32(h[22:])),
	}
	// Descriptors have 8-byte sizes in zip64 members: zipfile flags them
	// with saturated sizes in the local header, archive/zip only by
	// sizes that need them.
	zip64 := loc.csize == 0xffffffff || loc.usize == 0xffffffff || e.csize >= 0xffffffff || e.usize >= 0xffffffff
	if err := loc.zip64(nx[nl:], false); err != nil {
		return err
	}
	where := "local header"
	if flags&zipFlagDescriptor != 0 {
		// The CRC and sizes follow the data, in a descriptor with an
		// optional signature and 8-byte sizes when the header is zip64.
		where = "data descriptor"
		n := int64(16)
		if zip64 {
			n = 24
		}
		d := make([]byte, n)
		k, err := r.ReadAt(d, e.dataOff+int64(e.csize))
		d = d[:k]
		if len(d) >= 4 && binary.LittleEndian.Uint32(d) == zipDescriptorSig {
			d = d[4:]
		}
		if len(d) < int(n-4) || err != nil && err != io.EOF {
			return fieldErr(ErrTruncated, e.field+" data descriptor", e.dataOff+int64(e.csize), "past the end of the archive")
		}
		loc.crc = binary.LittleEndian.Uint32(d)
		if zip64 {
			loc.csize, loc.usize = binary.LittleEndian.Uint64(d[4:]), binary.LittleEndian.Uint64(d[12:])
		} else {
			loc.csize, loc.usize = uint64(binary.LittleEndian.Uint32(d[4:])), uint64(binary.LittleEndian.Uint32(d[8:]))
		}
	}
	switch {
	case loc.crc != e.crc:
		return zipErr(e.field+" "+where+" CRC-32", fmt.Sprintf("0x%08x", loc.crc), fmt.Sprintf("differs from the central directory's 0x%08x", e.crc))
	case loc.csize != e.csize:
		return zipErr(e.field+" "+where+" compressed size", loc.csize, fmt.Sprintf("differs from the central directory's %d", e.csize))
	case loc.usize != e.usize:
		return zipErr(e.field+" "+where+" uncompressed size", loc.usize, fmt.Sprintf("differs from the central directory's %d", e.usize))
	}
	return nil
}
