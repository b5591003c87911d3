package tensorfile

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// This file decodes LZMA (zip method 14): a 2-byte version, a 2-byte
// properties size (5), the LZMA properties (the lc/lp/pb byte and the
// dictionary size) and a raw LZMA1 stream, which ends with an end marker
// when general purpose bit 1 is set and after the uncompressed size
// otherwise. It follows the LZMA specification (lzma-specification.txt
// of the LZMA SDK): a range decoder, adaptive binary probabilities, and
// the 12-state machine over literals, matches and repeats of the last
// four distances. Neither the standard library nor golang.org/x has LZMA.
//
// Memory is bounded by the member: the dictionary window holds at most
// min(dictionary size, uncompressed size) bytes (distances past the data
// decoded so far are errors), the probabilities at most 0x300<<4 literal
// coders (lc+lp <= 4, as liblzma requires).
//
// Why not github.com/ulikunitz/xz/lzma (pure Go, no dependencies): this
// package is in the core module, which depends on the standard library
// and golang.org/x only; and compared outside the repository it is no
// better: it reads damaged members that liblzma and this decoder refuse
// (TestPeersLZMADamaged holds this decoder to liblzma), and is no faster
// on data that does not compress well (docs/performance.md).

const (
	lzmaProbInit     = 1 << 10 // half of 1<<11: bit 0 and 1 equally likely
	lzmaStates       = 12
	lzmaEndPosModel  = 14 // distance slots below it code their low bits with probabilities
	lzmaMinDict      = 1 << 12
	lzmaMaxMatch     = 273 // the longest match, 2 + 16 + 255
	lzmaPropsLen     = 5
	lzmaZipHeaderLen = 4 + lzmaPropsLen
	lzmaEndMarker    = 0xffffffff // the distance that marks the end of the stream
)

type lzmaProb uint16

// rangeDecoder is LZMA's binary arithmetic decoder.
type rangeDecoder struct {
	src  io.ByteReader
	rng  uint32
	code uint32
	read int64 // bytes taken from src
	err  error // the first read error, or corrupt data
}

func (d *rangeDecoder) next() uint32 {
	b, err := d.src.ReadByte()
	if err != nil {
		if d.err == nil {
			d.err = err
		}
		return 0
	}
	d.read++
	return uint32(b)
}

// init reads the 5 bytes that start every stream: a 0, then the code.
func (d *rangeDecoder) init() bool {
	first := d.next()
	d.rng = 0xffffffff
	for range 4 {
		d.code = d.code<<8 | d.next()
	}
	return first == 0 && d.code != d.rng
}

func (d *rangeDecoder) normalize() {
	if d.rng < 1<<24 {
		d.rng <<= 8
		d.code = d.code<<8 | d.next()
	}
}

// bit decodes one bit with probability *p (of a 0, in 1/2048) and adapts it.
func (d *rangeDecoder) bit(p *lzmaProb) uint32 {
	bound := (d.rng >> 11) * uint32(*p)
	var b uint32
	if d.code < bound {
		*p += (1<<11 - *p) >> 5
		d.rng = bound
	} else {
		*p -= *p >> 5
		d.code -= bound
		d.rng -= bound
		b = 1
	}
	d.normalize()
	return b
}

// direct decodes n bits of probability one half.
func (d *rangeDecoder) direct(n int) uint32 {
	var res uint32
	for range n {
		d.rng >>= 1
		d.code -= d.rng
		t := 0 - d.code>>31 // all ones when the bit is 0
		d.code += d.rng & t
		if d.code == d.rng {
			d.corrupt()
		}
		d.normalize()
		res = res<<1 + t + 1
	}
	return res
}

func (d *rangeDecoder) corrupt() {
	if d.err == nil {
		d.err = errLZMACorrupt
	}
}

var errLZMACorrupt = fmt.Errorf("range coder out of its interval")

// tree decodes bits bits, most significant first, with a tree of
// probabilities (probs[1:1<<bits]).
func (d *rangeDecoder) tree(probs []lzmaProb, bits int) uint32 {
	m := uint32(1)
	for range bits {
		m = m<<1 + d.bit(&probs[m])
	}
	return m - 1<<bits
}

// reverse decodes bits bits, least significant first.
func (d *rangeDecoder) reverse(probs []lzmaProb, bits int) uint32 {
	m, sym := uint32(1), uint32(0)
	for i := range bits {
		b := d.bit(&probs[m])
		m = m<<1 + b
		sym |= b << i
	}
	return sym
}

// lzmaLen decodes a match length minus 2: 0-7 (low, per position
// state), 8-15 (mid, per position state) or 16-271 (high).
type lzmaLen struct {
	choice, choice2 lzmaProb
	low, mid        [1 << 4][1 << 3]lzmaProb
	high            [1 << 8]lzmaProb
}

func (l *lzmaLen) decode(d *rangeDecoder, posState uint32) uint32 {
	if d.bit(&l.choice) == 0 {
		return d.tree(l.low[posState][:], 3)
	}
	if d.bit(&l.choice2) == 0 {
		return 8 + d.tree(l.mid[posState][:], 3)
	}
	return 16 + d.tree(l.high[:], 8)
}

// lzmaReader yields the bytes of a raw LZMA1 stream.
type lzmaReader struct {
	rc         rangeDecoder
	lc, lp, pb uint
	dictSize   uint32
	size       uint64 // bytes the stream must yield
	marker     bool   // the stream must end with the end marker
	field      string // for errors

	win     []byte // the dictionary, circular
	pos     int    // where the next byte goes in win
	total   uint64 // bytes decoded
	pending int    // decoded bytes not yet read: the last pending before pos
	eof     bool
	err     error

	state      uint32
	rep        [4]uint32 // the last four distances, minus 1
	literal    []lzmaProb
	isMatch    [lzmaStates << 4]lzmaProb
	isRep      [lzmaStates]lzmaProb
	isRepG0    [lzmaStates]lzmaProb
	isRepG1    [lzmaStates]lzmaProb
	isRepG2    [lzmaStates]lzmaProb
	isRep0Long [lzmaStates << 4]lzmaProb
	posSlot    [4][1 << 6]lzmaProb
	posDec     [1 + 128 - lzmaEndPosModel]lzmaProb
	align      [1 << 4]lzmaProb
	lenDec     lzmaLen
	repLenDec  lzmaLen
}

// newZipLZMAReader returns a reader of the bytes of the LZMA member e,
// whose compressed bytes src yields.
func newZipLZMAReader(src io.Reader, e *zipEntry) (io.Reader, error) {
	hdr := make([]byte, lzmaZipHeaderLen)
	if _, err := io.ReadFull(src, hdr); err != nil {
		return nil, fieldErr(ErrTruncated, e.field+" LZMA header", e.csize, "shorter than its 9 bytes")
	}
	if n := binary.LittleEndian.Uint16(hdr[2:]); n != lzmaPropsLen {
		return nil, zipErr(e.field+" LZMA properties size", n, "not 5")
	}
	z, err := newLZMAReader(bufio.NewReader(src), hdr[4:], e.usize, e.flags&zipFlagEOSMarker != 0, e.field)
	if err != nil {
		return nil, err
	}
	return z, nil
}

// newLZMAReader returns a reader of the raw LZMA1 stream src, with the
// 5 bytes of properties props, that yields size bytes (then the end
// marker, if marker).
func newLZMAReader(src io.ByteReader, props []byte, size uint64, marker bool, field string) (*lzmaReader, error) {
	d := uint(props[0])
	if d >= 9*5*5 {
		return nil, zipErr(field+" LZMA properties", d, "lc/lp/pb byte over 224")
	}
	z := &lzmaReader{lc: d % 9, lp: d / 9 % 5, pb: d / 45, size: size, marker: marker, field: field}
	if z.lc+z.lp > 4 {
		return nil, zipErr(field+" LZMA properties", fmt.Sprintf("lc=%d lp=%d", z.lc, z.lp), "lc+lp over 4 (liblzma refuses it)")
	}
	z.dictSize = max(binary.LittleEndian.Uint32(props[1:]), lzmaMinDict)
	z.win = make([]byte, max(min(uint64(z.dictSize), size), 1))
	z.literal = make([]lzmaProb, 0x300<<(z.lc+z.lp))
	for _, ps := range [][]lzmaProb{z.literal, z.isMatch[:], z.isRep[:], z.isRepG0[:], z.isRepG1[:], z.isRepG2[:],
		z.isRep0Long[:], z.posDec[:], z.align[:]} {
		fillProbs(ps)
	}
	for i := range z.posSlot {
		fillProbs(z.posSlot[i][:])
	}
	for _, l := range []*lzmaLen{&z.lenDec, &z.repLenDec} {
		l.choice, l.choice2 = lzmaProbInit, lzmaProbInit
		for i := range l.low {
			fillProbs(l.low[i][:])
			fillProbs(l.mid[i][:])
		}
		fillProbs(l.high[:])
	}
	z.rc.src = src
	if !z.rc.init() {
		z.fail(ErrFormat, "does not start as an LZMA stream does")
	}
	return z, nil
}

func fillProbs(ps []lzmaProb) {
	for i := range ps {
		ps[i] = lzmaProbInit
	}
}

// fail ends the stream with an error naming the byte of input reached.
func (z *lzmaReader) fail(sentinel error, why string) {
	if z.err == nil {
		z.err = fieldErr(sentinel, z.field+" LZMA data", fmt.Sprintf("input byte %d, output byte %d", lzmaZipHeaderLen+z.rc.read, z.total), why)
	}
}

func (z *lzmaReader) Read(p []byte) (int, error) {
	for z.pending == 0 {
		if z.err != nil {
			return 0, z.err
		}
		if z.eof {
			return 0, io.EOF
		}
		z.step()
		if z.rc.err != nil && z.err == nil {
			if z.rc.err == errLZMACorrupt {
				z.fail(ErrFormat, "corrupt: "+errLZMACorrupt.Error())
			} else {
				z.fail(ErrTruncated, "the compressed data ends early: "+z.rc.err.Error())
			}
		}
		if z.err != nil {
			z.pending = 0 // nothing decoded by a failed step is read
		}
	}
	start := z.pos - z.pending
	if start < 0 {
		start += len(z.win)
	}
	n := copy(p, z.win[start:min(start+z.pending, len(z.win))])
	z.pending -= n
	return n, nil
}

// get returns the byte dist bytes back (dist >= 1, dist <= total and
// within the window: the caller checked).
func (z *lzmaReader) get(dist uint32) byte {
	i := z.pos - int(dist)
	if i < 0 {
		i += len(z.win)
	}
	return z.win[i]
}

func (z *lzmaReader) put(b byte) {
	z.win[z.pos] = b
	z.pos++
	if z.pos == len(z.win) {
		z.pos = 0
	}
	z.total++
	z.pending++
}

// step decodes one literal, match or repeat (or the end).
func (z *lzmaReader) step() {
	rc := &z.rc
	if z.total == z.size && !z.marker && rc.code == 0 {
		z.eof = true
		return
	}
	posState := uint32(z.total) & (1<<z.pb - 1)
	s := z.state
	if rc.bit(&z.isMatch[s<<4+posState]) == 0 {
		if z.total == z.size {
			z.fail(ErrFormat, "more data than the member's uncompressed size")
			return
		}
		z.decodeLiteral()
		switch {
		case s < 4:
			z.state = 0
		case s < 10:
			z.state = s - 3
		default:
			z.state = s - 6
		}
		return
	}
	var n uint32
	if rc.bit(&z.isRep[s]) != 0 {
		if z.total == z.size {
			z.fail(ErrFormat, "more data than the member's uncompressed size")
			return
		}
		if z.total == 0 {
			z.fail(ErrFormat, "a repeat before any data")
			return
		}
		if rc.bit(&z.isRepG0[s]) == 0 {
			if rc.bit(&z.isRep0Long[s<<4+posState]) == 0 { // one byte, rep0 back
				z.state = 11
				if s < 7 {
					z.state = 9
				}
				z.put(z.get(z.rep[0] + 1))
				return
			}
		} else {
			var dist uint32
			if rc.bit(&z.isRepG1[s]) == 0 {
				dist = z.rep[1]
			} else {
				if rc.bit(&z.isRepG2[s]) == 0 {
					dist = z.rep[2]
				} else {
					dist = z.rep[3]
					z.rep[3] = z.rep[2]
				}
				z.rep[2] = z.rep[1]
			}
			z.rep[1] = z.rep[0]
			z.rep[0] = dist
		}
		n = z.repLenDec.decode(rc, posState)
		z.state = 11
		if s < 7 {
			z.state = 8
		}
	} else {
		z.rep[3], z.rep[2], z.rep[1] = z.rep[2], z.rep[1], z.rep[0]
		n = z.lenDec.decode(rc, posState)
		z.state = 10
		if s < 7 {
			z.state = 7
		}
		z.rep[0] = z.distance(n)
		if z.rep[0] == lzmaEndMarker {
			switch {
			case rc.err != nil:
			case rc.code != 0:
				z.fail(ErrFormat, "the end marker leaves the range coder unfinished")
			case z.total != z.size:
				z.fail(ErrTruncated, fmt.Sprintf("the stream ends after %d of its %d bytes", z.total, z.size))
			default:
				z.eof = true
			}
			return
		}
		if z.total == z.size {
			z.fail(ErrFormat, "more data than the member's uncompressed size")
			return
		}
		if z.rep[0] >= z.dictSize || uint64(z.rep[0]) >= z.total {
			z.fail(ErrFormat, fmt.Sprintf("a match %d bytes back, past the data or the %d-byte dictionary", uint64(z.rep[0])+1, z.dictSize))
			return
		}
	}
	n += 2
	if uint64(n) > z.size-z.total {
		z.fail(ErrFormat, "a match past the member's uncompressed size")
		return
	}
	d := z.rep[0] + 1
	for range n {
		z.put(z.get(d))
	}
}

func (z *lzmaReader) decodeLiteral() {
	prev := uint32(0)
	if z.total > 0 {
		prev = uint32(z.get(1))
	}
	ls := (uint32(z.total)&(1<<z.lp-1))<<z.lc + prev>>(8-z.lc)
	probs := z.literal[0x300*ls : 0x300*ls+0x300]
	sym := uint32(1)
	if z.state >= 7 { // after a match: the byte at rep0 guides the first bits
		match := uint32(z.get(z.rep[0] + 1))
		for sym < 0x100 {
			mb := match >> 7 & 1
			match <<= 1
			b := z.rc.bit(&probs[(1+mb)<<8+sym])
			sym = sym<<1 | b
			if mb != b {
				break
			}
		}
	}
	for sym < 0x100 {
		sym = sym<<1 | z.rc.bit(&probs[sym])
	}
	z.put(byte(sym))
}

// distance decodes the distance (minus 1) of a match of length n+2.
func (z *lzmaReader) distance(n uint32) uint32 {
	slot := z.rc.tree(z.posSlot[min(n, 3)][:], 6)
	if slot < 4 {
		return slot
	}
	bits := int(slot>>1) - 1
	dist := (2 | slot&1) << bits
	if slot < lzmaEndPosModel {
		return dist + z.rc.reverse(z.posDec[dist-slot:], bits)
	}
	dist += z.rc.direct(bits-4) << 4
	return dist + z.rc.reverse(z.align[:], 4)
}
