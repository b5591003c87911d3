package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dlarrow"
	"github.com/godlpack/dlpack/tensorfile"
)

// names is a repeatable string flag.
type names []string

func (n *names) String() string     { return strings.Join(*n, ",") }
func (n *names) Set(s string) error { *n = append(*n, s); return nil }

// npyName is the name a .npy file's tensor gets in a format with names, as
// np.savez names its first positional array.
const npyName = "arr_0"

func convert(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("convert", flag.ContinueOnError)
	var pick names
	fs.Var(&pick, "tensor", "convert only the tensor `NAME` (repeat for several); needed for a .npy output of a file of several tensors")
	from := fs.String("from", "", "input `FORMAT` (npy, npz, safetensors, arrow), whatever IN's extension")
	to := fs.String("to", "", "output `FORMAT` (npy, npz, safetensors, arrow), whatever OUT's extension")
	compress := fs.Bool("compress", false, "deflate the members of a .npz output, as np.savez_compressed")
	skip := fs.Bool("skip-unsupported", false, "leave out the tensors IN holds that cannot be converted (Arrow columns with no tensor form), each named on standard error, instead of failing")
	quiet := fs.Bool("quiet", false, "no progress bar, no notes (a tensor left out is always named)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: tensorfile convert [flags] IN OUT\n\n"+
			"Write the tensors of IN to OUT, formats by extension (.npy, .npz, .safetensors, .arrow/.feather/.ipc).\n"+
			"OUT is written to a temporary file beside it and renamed when complete.\n\n")
		fs.PrintDefaults()
	}
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("convert: want IN OUT, got %d arguments", len(pos))
	}
	inPath, outPath := pos[0], pos[1]
	var inFmt, outFmt format
	if *from != "" {
		if inFmt, err = formatNamed(*from); err != nil {
			return err
		}
	} else if inFmt, err = formatOf(inPath); err != nil {
		return err
	}
	if *to != "" {
		if outFmt, err = formatNamed(*to); err != nil {
			return err
		}
	} else if f, ok := formatByExtension(outPath); ok {
		outFmt = f
	} else {
		return usagef("convert: %s: cannot tell the output format from the name; name it with --to", outPath)
	}
	if *compress && outFmt != formatNPZ {
		return usagef("convert: --compress applies to .npz outputs only")
	}
	if outPath, err = outputPath(outPath); err != nil {
		return err
	}

	in, err := open(inPath, inFmt)
	if err != nil {
		return about(inPath, err)
	}
	defer in.close()
	notes := stderr
	if *quiet {
		notes = io.Discard
	}
	todo, err := choose(in, pick, outFmt, *skip, stderr)
	if err != nil {
		return err
	}
	var total int64
	for _, e := range todo {
		total += e.bytes
	}
	if (outFmt == formatNPY || outFmt == formatNPZ) && len(in.metadata) > 0 {
		fmt.Fprintf(notes, "tensorfile: note: %s has no metadata; %d metadata %s of %s not written\n",
			outFmt, len(in.metadata), plural(len(in.metadata), "entry", "entries"), inPath)
	}
	err = writeAtomically(outPath, total, !*quiet, stderr, func(w io.Writer) error {
		return write(w, outFmt, todo, in.metadata, *compress)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", outPath, err) // a PathError here names the temporary file
	}
	return nil
}

// outputPath checks OUT before anything is read or written, and returns
// the path to write: a symbolic link's target, so that the link stays a
// link. OUT must be a regular file or not exist, in a directory that
// does: the rename that completes a conversion would replace a
// directory's entry for a device (/dev/null, /dev/stdout) with a regular
// file.
func outputPath(path string) (string, error) {
	if target, err := filepath.EvalSymlinks(path); err == nil {
		path = target
	}
	st, err := os.Stat(path)
	switch {
	case err == nil && !st.Mode().IsRegular():
		return "", fmt.Errorf("%s: %w", path, notRegular(st.Mode()))
	case err == nil:
		return path, nil
	}
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	} else if !st.IsDir() {
		return "", fmt.Errorf("%s: %s is not a directory", path, dir)
	}
	return path, nil
}

// choose returns the tensors to write, in file order (or the order of
// pick), named for the output. Without pick, entries that cannot be
// converted (Arrow columns with no tensor form, ...) fail the conversion,
// naming each, unless skip is set: then each is named on stderr (a note
// --quiet does not silence) and left out. Nothing to write is always an
// error: convert never writes an empty file.
func choose(in *input, pick names, out format, skip bool, stderr io.Writer) ([]*entry, error) {
	var todo []*entry
	if len(pick) == 0 {
		var bad []string
		for _, e := range in.entries {
			if e.err != nil {
				bad = append(bad, fmt.Sprintf("%q: %v", e.name, e.err))
				continue
			}
			todo = append(todo, e)
		}
		switch {
		case len(in.entries) == 0:
			return nil, fmt.Errorf("%s: no tensor to write: the file holds none", in.path)
		case len(todo) == 0:
			return nil, fmt.Errorf("%s: no tensor to write: none of its %d %s can be converted:\n  %s", in.path,
				len(in.entries), plural(len(in.entries), "tensor", "tensors"), strings.Join(bad, "\n  "))
		case len(bad) > 0 && !skip:
			return nil, fmt.Errorf("%s: %d of its %d tensors cannot be converted (--skip-unsupported writes the others):\n  %s",
				in.path, len(bad), len(in.entries), strings.Join(bad, "\n  "))
		}
		for _, b := range bad {
			fmt.Fprintf(stderr, "tensorfile: note: skipped %s\n", b)
		}
	} else {
		for _, name := range pick {
			i := slices.IndexFunc(in.entries, func(e *entry) bool { return e.name == name })
			if i < 0 {
				return nil, fmt.Errorf("%s: %w: %q (it has %s)", in.path, tensorfile.ErrNotFound, name, listNames(in.entries))
			}
			todo = append(todo, in.entries[i])
		}
	}
	for _, e := range todo {
		if e.err != nil {
			return nil, fmt.Errorf("%s: %w", in.path, e.err)
		}
	}
	if out == formatNPY && len(todo) == 0 {
		return nil, fmt.Errorf("%s: no tensor to write to a .npy file", in.path)
	}
	if out == formatNPY && len(todo) != 1 {
		return nil, usagef("convert: %s holds %d tensors and a .npy file one: pick it with --tensor NAME (%s)",
			in.path, len(todo), listNames(todo))
	}
	if out != formatNPY {
		seen := map[string]bool{}
		renamed := make([]*entry, len(todo))
		for i, e := range todo {
			if e.name == "" {
				c := *e
				c.name = npyName
				e = &c
			}
			if seen[e.name] {
				return nil, fmt.Errorf("%s: two tensors are named %q; pick one with --tensor", in.path, e.name)
			}
			seen[e.name] = true
			renamed[i] = e
		}
		todo = renamed
	}
	return todo, nil
}

func listNames(es []*entry) string {
	qs := make([]string, len(es))
	for i, e := range es {
		qs[i] = fmt.Sprintf("%q", e.name)
	}
	return strings.Join(qs, ", ")
}

// write streams the tensors to w in format out.
func write(w io.Writer, out format, todo []*entry, metadata map[string]string, compress bool) error {
	if out == formatArrow {
		return writeArrow(w, todo, metadata)
	}
	// The writers take each tensor in turn; the one taken last is the
	// one a refusal is about, so the error can name it.
	var current string
	named := make([]tensorfile.Named, len(todo))
	for i, e := range todo {
		named[i] = tensorfile.Named{Name: e.name, Tensor: taken{e.src, e.name, &current}}
	}
	var err error
	switch out {
	case formatNPY:
		err = tensorfile.WriteNPY(w, named[0].Tensor)
	case formatNPZ:
		err = tensorfile.WriteNPZ(w, named, compress)
	case formatSafetensors:
		err = tensorfile.WriteSafetensors(w, named, metadata)
	default:
		return usagef("unknown format %q", out)
	}
	var fe *dlpack.FieldError
	if errors.As(err, &fe) && current != "" {
		return fmt.Errorf("tensor %q: %w", current, err)
	}
	return err
}

// taken is a tensor that records its name in *current when a writer takes
// it.
type taken struct {
	src     tensorSource
	name    string
	current *string
}

func (t taken) DescribeTensor(d *dlpack.Description) error {
	*t.current = t.name
	return t.src.DescribeTensor(d)
}

func (t taken) DLPackDevice() dlpack.Device { return t.src.DLPackDevice() }

func (t taken) DLPack(req dlpack.Request) (dlpack.Managed, error) { return dlpack.Produce(t, req) }

// writeArrow writes an Arrow IPC file of one record batch of one row: one
// fixed_shape_tensor column per tensor, sharing the input's mapping when
// the tensor is compact (dlarrow.ToField), a copy of the tensor alone
// otherwise (dlarrow.CopyToField).
func writeArrow(w io.Writer, todo []*entry, metadata map[string]string) error {
	mem := memory.NewGoAllocator()
	fields := make([]arrow.Field, 0, len(todo))
	cols := make([]arrow.Array, 0, len(todo))
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for _, e := range todo {
		row := reshaped{src: e.src, shape: append([]int64{1}, e.shape...), strides: append([]int64{elements(e.shape)}, e.strides...)}
		f, err := dlpack.From(row)
		if err != nil {
			return fmt.Errorf("tensor %q: %w", e.name, err)
		}
		var (
			field arrow.Field
			col   arrow.Array
		)
		if f.IsContiguous() {
			field, col, err = dlarrow.ToField(e.name, f)
			if err != nil {
				f.Close()
			}
		} else {
			field, col, err = dlarrow.CopyToField(e.name, f, mem)
			f.Close()
		}
		if err != nil {
			return fmt.Errorf("tensor %q: %w", e.name, err)
		}
		fields = append(fields, field)
		cols = append(cols, col)
	}
	var md *arrow.Metadata
	if len(metadata) > 0 {
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		vals := make([]string, len(keys))
		for i, k := range keys {
			vals[i] = metadata[k]
		}
		m := arrow.NewMetadata(keys, vals)
		md = &m
	}
	schema := arrow.NewSchema(fields, md)
	rec := array.NewRecordBatch(schema, cols, 1)
	defer rec.Release()
	fw, err := ipc.NewFileWriter(w, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	if err != nil {
		return err
	}
	if err := fw.Write(rec); err != nil {
		_ = fw.Close()
		return err
	}
	return fw.Close()
}

// writeAtomically runs fill on a buffered writer into a temporary file in
// OUT's directory and renames it to path once complete (fsynced); on any
// failure, or an interrupt, the temporary file is removed and path is
// left as it was. With bar, a progress bar of total bytes goes to stderr
// when stderr is a terminal and total is large.
func writeAtomically(path string, total int64, bar bool, stderr io.Writer, fill func(io.Writer) error) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".tmp-*")
	if err != nil {
		return err
	}
	stop := removeOnSignal(tmp.Name())
	defer stop()
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	var sink io.Writer = tmp
	p := newProgress(total, bar, stderr)
	if p != nil {
		sink = p.writer(tmp)
	}
	bw := bufio.NewWriterSize(sink, 1<<20)
	if err = fill(bw); err != nil {
		p.abort()
		return err
	}
	if err = bw.Flush(); err != nil {
		p.abort()
		return err
	}
	p.finish()
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Chmod(0o644); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// removeOnSignal removes the temporary file and exits 130 on an interrupt
// or termination while it is being written; the returned function stops
// watching.
func removeOnSignal(name string) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case <-ch:
			_ = os.Remove(name)
			os.Exit(130)
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}
