package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// The --json document (see the package doc; keys are stable).
type jsonReport struct {
	Files []jsonFile `json:"files"`
}

type jsonFile struct {
	Path     string            `json:"path"`
	Format   string            `json:"format,omitempty"`
	Metadata map[string]string `json:"metadata"`
	Tensors  []jsonTensor      `json:"tensors"`
	Skipped  []jsonSkipped     `json:"skipped,omitempty"`
	Error    string            `json:"error,omitempty"`
}

type jsonTensor struct {
	Name    string  `json:"name"`
	DType   string  `json:"dtype"`
	Shape   []int64 `json:"shape"`
	Strides []int64 `json:"strides"`
	Bytes   int64   `json:"bytes"`
	Layout  string  `json:"layout"`
	Mapped  bool    `json:"mapped"`
	CRC     string  `json:"crc,omitempty"`
}

type jsonSkipped struct {
	Name  string `json:"name"`
	Error string `json:"error"`
}

func inspect(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON document (schema in the package doc and docs/cli.md)")
	from := fs.String("from", "", "read every FILE as this `FORMAT` (npy, npz, safetensors, arrow), whatever its name")
	verify := fs.Bool("verify", false, "read every .npz member and check it against its CRC-32 (mapped members are otherwise not read, so not checked)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: tensorfile inspect [--json] [--verify] [--from FORMAT] FILE...\n\n"+
			"Print each tensor's name, dtype, shape, bytes, layout and whether it is mapped (zero-copy), and the file's metadata.\n\n")
		fs.PrintDefaults()
	}
	files, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return usagef("inspect: no files named")
	}
	var forced format
	if *from != "" {
		if forced, err = formatNamed(*from); err != nil {
			return err
		}
	}
	// One buffered writer for the whole output: the table writer writes
	// each cell on its own, a write call per cell on stdout otherwise.
	// It is flushed before each error, so that on a terminal the errors
	// and the tables come in the order of the files.
	out := bufio.NewWriterSize(stdout, 64<<10)
	report := jsonReport{Files: []jsonFile{}}
	failed := false
	for i, path := range files {
		jf := inspectFile(path, forced, *verify)
		if jf.Error != "" {
			failed = true
		}
		if *asJSON {
			report.Files = append(report.Files, jf)
			continue
		}
		if jf.Error != "" {
			if err := out.Flush(); err != nil {
				return err
			}
			fmt.Fprintln(stderr, jf.Error)
			continue
		}
		if i > 0 {
			fmt.Fprintln(out)
		}
		printFile(out, jf)
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return err
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	if failed {
		return errReported
	}
	return nil
}

// inspectFile opens one file and describes it; a file that cannot be read
// has only Path, Error and, when it is known (from the extension, --from
// or the first bytes), Format.
func inspectFile(path string, forced format, verify bool) jsonFile {
	jf := jsonFile{Path: path, Metadata: map[string]string{}, Tensors: []jsonTensor{}}
	f := forced
	if f == "" {
		var err error
		if f, err = formatOf(path); err != nil {
			jf.Error = err.Error()
			return jf
		}
	}
	jf.Format = string(f)
	in, err := open(path, f, verify)
	if err != nil {
		jf.Error = about(path, err).Error()
		return jf
	}
	defer in.close()
	for k, v := range in.metadata {
		jf.Metadata[k] = v
	}
	for _, e := range in.entries {
		if e.err != nil {
			jf.Skipped = append(jf.Skipped, jsonSkipped{Name: e.name, Error: e.err.Error()})
			continue
		}
		// shapes and strides are arrays, [] for a 0-d tensor, never null
		jf.Tensors = append(jf.Tensors, jsonTensor{Name: e.name, DType: e.dtype.String(),
			Shape: append([]int64{}, e.shape...), Strides: append([]int64{}, e.strides...),
			Bytes: e.bytes, Layout: layout(e.shape, e.strides), Mapped: e.mapped, CRC: e.crc})
	}
	return jf
}

// about prefixes err with the file it is about, unless it names it already
// (an *fs.PathError: "open x.npy: no such file or directory").
func about(path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return err
	}
	return fmt.Errorf("%s: %w", path, err)
}

// printFile prints the human form: a header line, an aligned table of the
// tensors, the skipped columns and the metadata.
func printFile(w io.Writer, jf jsonFile) {
	var total int64
	for _, t := range jf.Tensors {
		total += t.Bytes
	}
	fmt.Fprintf(w, "%s: %s, %d %s, %s\n", jf.Path, jf.Format, len(jf.Tensors), plural(len(jf.Tensors), "tensor", "tensors"), humanBytes(total))
	if len(jf.Tensors) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		crc := jf.Tensors[0].CRC != "" // .npz: a CRC-32 column
		head := "  NAME\tDTYPE\tSHAPE\tBYTES\tLAYOUT\tZERO-COPY"
		if crc {
			head += "\tCRC-32"
		}
		fmt.Fprintln(tw, head)
		for _, t := range jf.Tensors {
			name := t.Name
			if name == "" {
				name = "-"
			}
			zc := "mapped"
			if !t.Mapped {
				zc = "copied"
			}
			line := fmt.Sprintf("  %s\t%s\t%s\t%d\t%s\t%s", name, t.DType, shapeString(t.Shape), t.Bytes, t.Layout, zc)
			if crc {
				line += "\t" + t.CRC
			}
			fmt.Fprintln(tw, line)
		}
		tw.Flush()
	}
	for _, s := range jf.Skipped {
		fmt.Fprintf(w, "  skipped %s: %s\n", s.Name, s.Error)
	}
	if len(jf.Metadata) > 0 {
		fmt.Fprintln(w, "  metadata:")
		keys := make([]string, 0, len(jf.Metadata))
		for k := range jf.Metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v := jf.Metadata[k]
			if len(v) > 200 {
				v = v[:200] + fmt.Sprintf("... (%d bytes)", len(jf.Metadata[k]))
			}
			fmt.Fprintf(w, "    %s: %s\n", k, v)
		}
	}
}

// shapeString spells a shape as NumPy does: (2, 3), (5,), ().
func shapeString(shape []int64) string {
	parts := make([]string, len(shape))
	for i, d := range shape {
		parts[i] = strconv.FormatInt(d, 10)
	}
	if len(shape) == 1 {
		return "(" + parts[0] + ",)"
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
