//go:build cgo

package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlarrow"
	"github.com/godlpack/dlpack/tensorfile"
)

// The outcomes a corpus file may expect of the libraries
// (testdata/conformance.py).
const (
	expectEqual      = "equal"              // read equal to the peer, bit for bit
	expectRefused    = "refused-as-peer"    // refused, as the peer refuses it
	expectPeerReads  = "refused-peer-reads" // refused although the peer reads it, for a reason
	conformanceDoc   = "../../docs/conformance.md"
	defaultFlipLimit = 250 // flips per sweep file unless CONFORMANCE_FLIPS says

)

// sentinels are the errors a corpus file may name.
var sentinels = map[string]error{
	"tensorfile.ErrFormat": tensorfile.ErrFormat, "tensorfile.ErrTruncated": tensorfile.ErrTruncated,
	"tensorfile.ErrLayout": tensorfile.ErrLayout, "tensorfile.ErrDType": tensorfile.ErrDType,
	"tensorfile.ErrByteOrder": tensorfile.ErrByteOrder, "tensorfile.ErrChecksum": tensorfile.ErrChecksum,
	"dlarrow.ErrFormat": dlarrow.ErrFormat, "dlarrow.ErrTruncated": dlarrow.ErrTruncated,
	"dlarrow.ErrBuffer": dlarrow.ErrBuffer, "dlarrow.ErrType": dlarrow.ErrType, "dlarrow.ErrNulls": dlarrow.ErrNulls,
	"dlpack.ErrShape": dlpack.ErrShape, "dlpack.ErrOverflow": dlpack.ErrOverflow,
}

// sentinelName names the sentinel err wraps, or "".
func sentinelName(err error) string {
	for _, name := range slices.Sorted(maps.Keys(sentinels)) {
		if errors.Is(err, sentinels[name]) {
			return name
		}
	}
	return ""
}

// peerOutcome is what a format's reference reader does with a file.
type peerOutcome struct {
	Reads  *peerFile `json:"reads"`
	Raises string    `json:"raises"`
}

type corpusFile struct {
	File     string      `json:"file"`
	Format   format      `json:"format"`
	What     string      `json:"what"`
	Expect   string      `json:"expect"`
	Sentinel string      `json:"sentinel"`
	Reason   string      `json:"reason"`
	Peer     peerOutcome `json:"peer"`
}

type corpusManifest struct {
	Files []corpusFile `json:"files"`
	Sweep []string     `json:"sweep"`
}

// writeCorpus has the peers write the corpus (testdata/conformance.py).
func writeCorpus(t *testing.T) (string, corpusManifest) {
	t.Helper()
	py := python(t)
	dir := t.TempDir()
	cmd := exec.Command(py, "testdata/conformance.py", "write", dir)
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("conformance.py write: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m corpusManifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return dir, m
}

// peerRead reads the files with their reference readers.
func peerRead(t *testing.T, paths []string) map[string]peerOutcome {
	t.Helper()
	cmd := exec.Command(python(t), "testdata/conformance.py", "read")
	cmd.Stdin = strings.NewReader(strings.Join(paths, "\n"))
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("conformance.py read: %v", err)
	}
	var out map[string]peerOutcome
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// libRead reads every tensor of the file at path with package tensorfile
// (.npz members' CRC-32 checked, its default) or dlarrow (as the command
// opens Arrow files, openArrow: columns with no tensor form are left out,
// as the peer script leaves out columns that are not numbers; any other
// error of a column is the file's), each as its dtype, shape and the
// SHA-256 of its C-order bytes.
func libRead(path string, f format) (pf peerFile, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	pf = peerFile{Tensors: map[string]peerTensor{}, Metadata: map[string]string{}}
	var srcs map[string]dlpack.Source
	var md map[string]string
	switch f {
	case formatArrow:
		in, err := openArrow(&input{path: path, format: f})
		if err != nil {
			return pf, err
		}
		defer in.close()
		srcs = map[string]dlpack.Source{}
		for _, e := range in.entries {
			if e.err == nil {
				srcs[e.name] = e.src
			}
		}
		md = in.metadata
	default:
		var tf *tensorfile.File
		switch f {
		case formatNPY:
			tf, err = tensorfile.OpenNPY(path)
		case formatNPZ:
			tf, err = tensorfile.OpenNPZ(path)
		case formatSafetensors:
			tf, err = tensorfile.OpenSafetensors(path)
		}
		if err != nil {
			return pf, err
		}
		defer tf.Close()
		srcs = map[string]dlpack.Source{}
		for _, tn := range tf.Tensors() {
			srcs[tn.Name()] = tn
		}
		md = tf.Metadata()
	}
	for name, src := range srcs {
		var d dlpack.Description
		if err := src.DescribeTensor(&d); err != nil {
			return pf, err
		}
		b, err := cOrder(&d)
		// a description holds its owner until it is released, as a
		// consumer's tensor does
		if r, ok := d.Owner.(dlpack.Releaser); ok {
			r.ReleaseTensor()
		}
		if err != nil {
			return pf, fmt.Errorf("%q: %w", name, err)
		}
		sum := sha256.Sum256(b)
		pf.Tensors[name] = peerTensor{DType: d.DType.String(), Shape: slices.Clone(d.Shape), SHA256: hex.EncodeToString(sum[:])}
	}
	maps.Copy(pf.Metadata, md)
	return pf, nil
}

// cOrder copies a CPU tensor's elements, in C order, out of the memory d
// describes.
func cOrder(d *dlpack.Description) ([]byte, error) {
	item := int64(d.DType.ItemSize())
	n := elements(d.Shape)
	out := make([]byte, 0, n*item)
	if n == 0 {
		return out, nil
	}
	strides := d.Strides
	if strides == nil {
		strides = rowMajor(d.Shape)
	}
	mem := unsafe.Slice((*byte)(d.Data), d.Size)
	idx := make([]int64, len(d.Shape))
	for range n {
		at := int64(d.ByteOffset)
		for i, x := range idx {
			at += x * strides[i] * item
		}
		if at < 0 || at+item > int64(len(mem)) {
			return nil, fmt.Errorf("element at byte %d outside the %d bytes described", at, len(mem))
		}
		out = append(out, mem[at:at+item]...)
		for i := len(idx) - 1; i >= 0; i-- {
			if idx[i]++; idx[i] < d.Shape[i] {
				break
			}
			idx[i] = 0
		}
	}
	return out, nil
}

// sameTensors reports whether two reads agree bit for bit, and if not,
// how.
func sameTensors(got, want peerFile) string {
	if !slices.Equal(slices.Sorted(maps.Keys(got.Tensors)), slices.Sorted(maps.Keys(want.Tensors))) {
		return fmt.Sprintf("tensors %q, the peer reads %q", slices.Sorted(maps.Keys(got.Tensors)), slices.Sorted(maps.Keys(want.Tensors)))
	}
	for name, g := range got.Tensors {
		w := want.Tensors[name]
		if g.DType != w.DType || !slices.Equal(g.Shape, w.Shape) || g.SHA256 != w.SHA256 {
			return fmt.Sprintf("%q: %s %v sha256 %.12s, the peer reads %s %v sha256 %.12s", name, g.DType, g.Shape, g.SHA256, w.DType, w.Shape, w.SHA256)
		}
	}
	if !maps.Equal(got.Metadata, want.Metadata) && (len(got.Metadata) > 0 || len(want.Metadata) > 0) {
		return fmt.Sprintf("metadata %v, the peer reads %v", got.Metadata, want.Metadata)
	}
	return ""
}

// convertTarget is the format a file of the corpus is converted to: the
// first, other than its own, that holds all its tensors, else its own.
func convertTarget(c corpusFile) format {
	for _, out := range []format{formatSafetensors, formatNPZ, formatArrow} {
		if out == c.Format {
			continue
		}
		fitsAll := c.Peer.Reads != nil
		if fitsAll {
			for _, tn := range c.Peer.Reads.Tensors {
				fitsAll = fitsAll && fits(out, tn)
			}
		}
		if fitsAll {
			return out
		}
	}
	return c.Format
}

// corpusRow is a file's line in docs/conformance.md.
type corpusRow struct {
	c    corpusFile
	ours string
}

// TestConformanceCorpus: every file of the peer-written corpus
// (testdata/conformance.py) is read by the libraries as its manifest
// expects: equal to what the format's reference reader reads, bit for bit,
// or refused with the sentinel named (where the peer refuses it too, or,
// for a reason the manifest gives, where it reads it). The command agrees:
// inspect and convert exit 0 on the files read, and each conversion is
// read back by the peers equal to the original; on the files refused,
// both exit 1 with the library's message and convert writes nothing.
// docs/conformance.md is rendered from the outcomes (UPDATE_DOCS=1
// rewrites it).
func TestConformanceCorpus(t *testing.T) {
	dir, m := writeCorpus(t)
	outDir := t.TempDir()
	if err := os.Mkdir(filepath.Join(outDir, "again"), 0o755); err != nil {
		t.Fatal(err)
	}
	type conversion struct {
		c    corpusFile
		out  string
		want peerFile
	}
	var convs []conversion
	var rows []corpusRow
	counts := map[format]map[string]int{}
	for _, c := range m.Files {
		path := filepath.Join(dir, c.File)
		if counts[c.Format] == nil {
			counts[c.Format] = map[string]int{}
		}
		counts[c.Format][c.Expect]++
		got, err := libRead(path, c.Format)
		row := corpusRow{c: c}
		switch c.Expect {
		case expectEqual:
			if c.Peer.Reads == nil {
				t.Errorf("%s: expected equal, but the peer raises %s", c.File, c.Peer.Raises)
				continue
			}
			if err != nil {
				t.Errorf("%s: %v; the peer reads it", c.File, err)
				continue
			}
			if diff := sameTensors(got, *c.Peer.Reads); diff != "" {
				t.Errorf("%s: %s", c.File, diff)
			}
			row.ours = "read equal, " + tensors(len(got.Tensors))
		case expectRefused, expectPeerReads:
			if c.Expect == expectRefused && c.Peer.Reads != nil {
				t.Errorf("%s: expected refused as the peer refuses it, but the peer reads it", c.File)
			}
			if c.Expect == expectPeerReads && c.Peer.Reads == nil {
				t.Errorf("%s: expected refused where the peer reads it, but the peer raises %s", c.File, c.Peer.Raises)
			}
			want, known := sentinels[c.Sentinel]
			if !known {
				t.Fatalf("%s: unknown sentinel %q", c.File, c.Sentinel)
			}
			if err == nil || !errors.Is(err, want) {
				t.Errorf("%s: %v, want %s", c.File, err, c.Sentinel)
				continue
			}
			row.ours = strings.ReplaceAll(err.Error(), path, c.File)
		default:
			t.Fatalf("%s: unknown outcome %q", c.File, c.Expect)
		}
		rows = append(rows, row)

		// the command: inspect, then convert
		to := convertTarget(c)
		out := filepath.Join(outDir, strings.TrimSuffix(c.File, filepath.Ext(c.File))+"."+string(to))
		ri := tf(t, "inspect", "--verify", path)
		args := []string{"convert", "--quiet", "--skip-unsupported", path, out}
		if to == c.Format {
			// a format that holds them all is the file's own
			out = filepath.Join(outDir, "again", filepath.Base(out))
			args[4] = out
		}
		rc := tf(t, args...)
		if c.Expect == expectEqual {
			if ri.code != 0 || rc.code != 0 {
				t.Errorf("%s: inspect exits %d (%s), convert to %s exits %d (%s); want 0", c.File, ri.code, ri.stderr, to, rc.code, rc.stderr)
				continue
			}
			want := peerFile{Tensors: map[string]peerTensor{}, Metadata: map[string]string{}}
			for name, tn := range c.Peer.Reads.Tensors {
				if name == "" {
					name = npyName
				}
				want.Tensors[name] = tn
			}
			if (to == formatSafetensors || to == formatArrow) && (c.Format == formatSafetensors || c.Format == formatArrow) {
				want.Metadata = c.Peer.Reads.Metadata
			}
			convs = append(convs, conversion{c, out, want})
			continue
		}
		msg := sentinels[c.Sentinel].Error()
		if ri.code != 1 || !strings.Contains(ri.stderr, msg) || rc.code != 1 || !strings.Contains(rc.stderr, msg) {
			t.Errorf("%s: inspect exits %d (%q), convert exits %d (%q); want 1 and %q", c.File, ri.code, ri.stderr, rc.code, rc.stderr, msg)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%s: a refused convert left %s", c.File, out)
		}
	}
	outs := make([]string, len(convs))
	for i, cv := range convs {
		outs[i] = cv.out
	}
	back := peerRead(t, outs)
	for _, cv := range convs {
		p := back[cv.out]
		if p.Reads == nil {
			t.Errorf("%s converted to %s: the peer raises %s", cv.c.File, filepath.Base(cv.out), p.Raises)
			continue
		}
		if diff := sameTensors(*p.Reads, cv.want); diff != "" {
			t.Errorf("%s converted to %s, read back: %s", cv.c.File, filepath.Base(cv.out), diff)
		}
	}
	var summary []string
	for _, f := range slices.Sorted(maps.Keys(counts)) {
		n := counts[f]
		summary = append(summary, fmt.Sprintf("%s: %d equal, %d refused as the peer refuses, %d refused where the peer reads", f, n[expectEqual], n[expectRefused], n[expectPeerReads]))
	}
	t.Logf("corpus: %d files written by the peers, as they read them; %d conversions read back bit for bit\n%s", len(m.Files), len(convs), strings.Join(summary, "\n"))
	checkDoc(t, renderConformance(rows, counts))
}

// renderConformance is docs/conformance.md.
func renderConformance(rows []corpusRow, counts map[format]map[string]int) string {
	var b strings.Builder
	b.WriteString(`# The peer-written conformance corpus

Generated by ` + "`TestConformanceCorpus`" + ` (command ` + "`cmd/tensorfile`" + `) from the files
` + "`cmd/tensorfile/testdata/conformance.py`" + ` has the peers write at test time
(np.save, np.savez, np.savez_compressed, zipfile with ZIP_BZIP2 and
ZIP_LZMA, safetensors.numpy.save_file, pyarrow's IPC writer and
feather.write_feather), the hostile ones by editing the bytes a peer
wrote. Each file is read by its format's reference reader (np.load with
every member read, safetensors.deserialize and safe_open,
pyarrow.ipc.open_file) and by package ` + "`tensorfile`" + ` (.npz members CRC-checked, its default) or
` + "`dlarrow`" + `: read equal bit for bit, or refused with the sentinel shown (test
it with ` + "`errors.Is`" + `), where the peer refuses the file too or, for the
reason given, where it reads it. The command agrees: ` + "`inspect --verify`" + ` and ` + "`convert`" + `
exit 0 on the files read, every conversion read back by the peers equal
to the original; on the files refused both exit 1 with the message shown
and convert writes nothing.

The flipped-byte sweeps (` + "`TestConformanceFlips`" + `, [testing.md](testing.md)) flip bits
of a small peer-written file of each format and judge each variant by the
same reference reader: where it raises, the library must fail; where both
read, they must read the same, bit for bit. The variants the library
refuses and the peer reads fail checks the peers skip: an .npz local
header that disagrees with the central directory (zipfile reads by the
central directory), a deflate stream without its final block (zipfile
stops at the declared size), a .npy file longer than its header says, an
Arrow file whose leading magic, stream messages or schema disagree with
its footer (pyarrow's file reader reads the footer and the blocks it
points to), a validity bitmap shorter than its column, a column longer
than its batch. One
documented case goes the other way: an .npz member whose name in the
central directory does not end in .npy is skipped unread, and np.load
raises only when that member is read. The malformed files
package ` + "`tensorfile`" + ` refuses are catalogued in [rejects-files.md](rejects-files.md).
Regenerate with ` + "`UPDATE_DOCS=1 TENSORFILE_PYTHON=.venv/bin/python go test -run TestConformanceCorpus ./cmd/tensorfile`" + `

`)
	total := 0
	b.WriteString("| format | read equal to the peer | refused as the peer refuses | refused where the peer reads |\n|---|---|---|---|\n")
	for _, f := range slices.Sorted(maps.Keys(counts)) {
		n := counts[f]
		total += n[expectEqual] + n[expectRefused] + n[expectPeerReads]
		fmt.Fprintf(&b, "| %s | %d | %d | %d |\n", f, n[expectEqual], n[expectRefused], n[expectPeerReads])
	}
	fmt.Fprintf(&b, "\n%d files.\n\n| file | what | the peer | package tensorfile / dlarrow | reason |\n|---|---|---|---|---|\n", total)
	esc := strings.NewReplacer("|", `\|`, "\n", " ").Replace
	for _, r := range rows {
		peer := ""
		if r.c.Peer.Reads != nil {
			peer = "reads " + tensors(len(r.c.Peer.Reads.Tensors))
		} else {
			peer = "raises " + r.c.Peer.Raises
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.c.File, esc(r.c.What), esc(peer), esc(r.ours), esc(r.c.Reason))
	}
	return b.String()
}

func tensors(n int) string {
	if n == 1 {
		return "1 tensor"
	}
	return fmt.Sprintf("%d tensors", n)
}

// checkDoc fails the test if docs/conformance.md is not text, or rewrites
// it with UPDATE_DOCS set.
func checkDoc(t *testing.T, text string) {
	t.Helper()
	if os.Getenv("UPDATE_DOCS") != "" {
		if err := os.WriteFile(conformanceDoc, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	old, err := os.ReadFile(conformanceDoc)
	if err != nil || !bytes.Equal(old, []byte(text)) {
		t.Errorf("%s is not current (err %v): run UPDATE_DOCS=1 TENSORFILE_PYTHON=.venv/bin/python go test -run TestConformanceCorpus ./cmd/tensorfile", conformanceDoc, err)
	}
}

// npzSkippedName is zipfile's complaint about a local header that names
// another member than the central directory.
var npzSkippedName = regexp.MustCompile(`^BadZipFile: File name in directory '([^']*)' and header`)

// flipExcused gives the documented reason for which the library reads a
// variant the peer raises on, or "".
func flipExcused(f format, raises string) string {
	if m := npzSkippedName.FindStringSubmatch(raises); f == formatNPZ && m != nil && !strings.HasSuffix(m[1], ".npy") {
		return "a member whose name in the central directory does not end in .npy is skipped unread (OpenNPZ); np.load raises only when it is read"
	}
	return ""
}

// errField is the field a *dlpack.FieldError names, digits dropped, to
// group errors by kind.
func errField(err error) string {
	var fe *dlpack.FieldError
	if !errors.As(err, &fe) {
		return "(no field)"
	}
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return -1
		}
		return r
	}, fe.Field)
}

// flip is one variant of a sweep: bit of byte offset flipped.
type flip struct{ offset, bit int }

func (f flip) String() string { return fmt.Sprintf("byte %d bit %d", f.offset, f.bit) }

// flipsOf picks the flips of a file of size bytes that CONFORMANCE_FLIPS
// asks for: a count (defaultFlipLimit when unset), spread evenly from the
// first byte to the last, each byte's bit offset%8; "all", every byte
// (bit offset%8); "bits", every bit of every byte.
func flipsOf(t *testing.T, size int) []flip {
	limit := defaultFlipLimit
	switch v := os.Getenv("CONFORMANCE_FLIPS"); v {
	case "":
	case "all":
		limit = size
	case "bits":
		fs := make([]flip, 0, 8*size)
		for off := range size {
			for bit := range 8 {
				fs = append(fs, flip{off, bit})
			}
		}
		return fs
	default:
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("CONFORMANCE_FLIPS=%q: want a count, \"all\" or \"bits\"", v)
		}
		limit = n
	}
	limit = min(limit, size)
	fs := make([]flip, limit)
	for i := range fs {
		off := i * size / limit
		fs[i] = flip{off, off % 8}
	}
	return fs
}

// TestConformanceFlips: the flipped-byte sweeps. For each format, a small
// valid file written by the peers, one bit flipped at a time in a bounded,
// evenly spread sample of its bytes (header and body; every byte with
// CONFORMANCE_FLIPS=all, every bit of every byte with CONFORMANCE_FLIPS=bits,
// make conformance-campaign). For each variant the
// library must not panic; where the format's reference reader raises, it
// must fail too; where both read, they must read the same tensors, bit for
// bit. A variant refused here that the peer reads is counted, by sentinel.
func TestConformanceFlips(t *testing.T) {
	dir, m := writeCorpus(t)
	flipDir := t.TempDir()
	type variant struct {
		src  string
		flip flip
		path string
	}
	var variants []variant
	for _, name := range m.Sweep {
		intact, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, fl := range flipsOf(t, len(intact)) {
			b := slices.Clone(intact)
			b[fl.offset] ^= 1 << fl.bit
			p := filepath.Join(flipDir, fmt.Sprintf("%d.%d.%s", fl.offset, fl.bit, name))
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			variants = append(variants, variant{name, fl, p})
		}
	}
	paths := make([]string, len(variants))
	for i, v := range variants {
		paths[i] = v.path
	}
	peer := peerRead(t, paths)
	type tally struct{ flips, bothRead, bothRefuse, oursOnly, excused int }
	tallies := map[string]*tally{}
	oursOnly, example, excused := map[string]int{}, map[string]string{}, map[string]int{}
	for _, v := range variants {
		f, _ := formatByExtension(v.src)
		tl := tallies[v.src]
		if tl == nil {
			tl = &tally{}
			tallies[v.src] = tl
		}
		tl.flips++
		got, err := libRead(v.path, f)
		if err != nil && strings.HasPrefix(err.Error(), "panic:") {
			t.Errorf("%s, %v flipped: %v", v.src, v.flip, err)
			continue
		}
		p := peer[v.path]
		switch {
		case p.Reads == nil && err == nil:
			if why := flipExcused(f, p.Raises); why != "" {
				tl.excused++
				excused[why]++
				continue
			}
			t.Errorf("%s, %v flipped: the peer raises %s, read here", v.src, v.flip, p.Raises)
		case p.Reads == nil:
			tl.bothRefuse++
		case err != nil:
			tl.oursOnly++
			name := sentinelName(err)
			if name == "" {
				t.Errorf("%s, %v flipped: %v wraps no sentinel", v.src, v.flip, err)
			}
			key := fmt.Sprintf("%s %s %s", f, name, errField(err))
			if oursOnly[key] == 0 {
				example[key] = fmt.Sprintf("%v of %s: %v", v.flip, v.src, err)
			}
			oursOnly[key]++
		default:
			tl.bothRead++
			if diff := sameTensors(got, *p.Reads); diff != "" {
				t.Errorf("%s, %v flipped: %s", v.src, v.flip, diff)
			}
		}
	}
	total := 0
	for _, name := range m.Sweep {
		tl := tallies[name]
		total += tl.flips
		t.Logf("flips %s: %d: %d read by both, equal; %d refused by both; %d refused here, read by the peer; %d read here, raised by the peer for a documented reason",
			name, tl.flips, tl.bothRead, tl.bothRefuse, tl.oursOnly, tl.excused)
	}
	for _, k := range slices.Sorted(maps.Keys(oursOnly)) {
		t.Logf("flips refused here, read by the peer: %s: %d (%s)", k, oursOnly[k], example[k])
	}
	for _, k := range slices.Sorted(maps.Keys(excused)) {
		t.Logf("flips read here, raised by the peer: %d: %s", excused[k], k)
	}
	t.Logf("flips: %d variants of %d files", total, len(m.Sweep))
}
