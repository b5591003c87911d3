// Command tensorfile inspects and converts tensor files: NumPy .npy and
// .npz, safetensors, and Arrow IPC files (Feather v2). It is a thin layer
// over packages tensorfile and dlarrow, which memory-map the input, so no
// file is read into memory as a whole (except what cannot be mapped: the
// members of a deflated or misaligned .npz, and safetensors tensors
// misaligned in their file, which package tensorfile copies when it opens
// the file).
//
//	go run github.com/godlpack/dlpack/cmd/tensorfile inspect [--json] [--verify] FILE...
//	go run github.com/godlpack/dlpack/cmd/tensorfile convert [flags] IN OUT
//
// inspect prints, for each file, every tensor's name, data type, shape,
// size in bytes, memory layout (C or Fortran order, or strided) and whether
// it is mapped (a zero-copy view of the file) or copied (a deflated or
// misaligned .npz member, a misaligned safetensors tensor, a column of a
// compressed Arrow file, which dlarrow decompresses), and for an .npz
// whether its bytes were checked against the member's CRC-32 (copied
// members always are; mapped ones only with --verify, which reads them),
// then the file's metadata (safetensors __metadata__, the Arrow schema's
// metadata). With --json it prints one JSON document instead:
//
//	{"files": [{
//	    "path": "model.safetensors", "format": "safetensors",
//	    "metadata": {"format": "pt"},
//	    "tensors": [{"name": "w", "dtype": "float32", "shape": [2, 3],
//	                 "strides": [3, 1], "bytes": 24, "layout": "C",
//	                 "mapped": true, "crc": "unchecked"}],
//	    "skipped": [{"name": "label", "error": "..."}],
//	    "error": "..."}]}
//
// format is one of npy, npz, safetensors, arrow; dtype is the DLPack type
// name (bool, int8..int64, uint8..uint64, float16, bfloat16, float32,
// float64, complex64, complex128, float8_e4m3fn, ...); strides are in
// elements; layout is "C", "F" or "strided"; crc is present for .npz
// members only ("checked" or "unchecked"); metadata is always an object
// ({} when the file has none). skipped lists Arrow columns that have no
// tensor form (strings, nulls, ...) and is omitted when empty; error is
// present only for a file that could not be read, which then has no
// tensors and, when its format is known, keeps format. An Arrow column
// that cannot be read because the file is malformed (a compressed buffer
// that does not decompress to its declared length, ...) is not skipped:
// the file could not be read. The keys are stable: new ones may be
// added, none renamed.
//
// convert writes the tensors of IN to OUT, each format to each, picking
// the formats by extension (.npy, .npz, .safetensors, .arrow/.feather/.ipc;
// --from and --to override). The input is mapped and each tensor streams
// from the mapping through a buffered writer into a temporary file next to
// OUT, renamed to OUT only when everything was written: a failure never
// leaves a partial OUT. Every .npz member of IN is checked against its
// CRC-32. OUT is a new name or a regular file (a symbolic
// link is written through); IN is a regular file. On a terminal, inputs of 32 MiB or more show a
// progress bar on standard error; when standard error is not a terminal,
// nothing but errors and notes (metadata a format cannot keep, columns left
// out) is printed. Flags:
//
//	--tensor NAME  convert only this tensor (repeat for several); a .npy
//	               output holds one tensor, so a file of several needs it
//	--skip-unsupported
//	               leave out the tensors that do not convert (Arrow
//	               columns with no tensor form), naming each on standard
//	               error, instead of failing
//	--compress     deflate the members of a .npz output (np.savez_compressed)
//	--from, --to   the input and output format, whatever the extensions
//	--quiet        no progress bar, no notes (but each tensor
//	               --skip-unsupported left out is named)
//
// Names: the tensor of a .npy file has no name; written to a format with
// names it is "arr_0", as np.savez names a positional array. An Arrow file
// holds one fixed_shape_tensor column per tensor, in one row; reading, an
// Arrow file of one record batch of one row gives each fixed_shape_tensor
// column as the tensor of that row (so conversions through Arrow keep
// shapes), and otherwise every column as a tensor of shape (rows, ...).
// Other columns of numbers are 1-d tensors; in files of several record
// batches, column c of batch b is named "c[b]". Columns with no tensor
// form (strings, nulls, ...) are listed by inspect as skipped; convert
// fails naming them (exit 1, no file written) unless --skip-unsupported,
// which leaves them out with a note on standard error that --quiet does
// not silence; a malformed file fails both, whatever the flags. convert
// never writes an empty file: an input with no tensor, or none that
// converts, exits 1 whatever the flags. Compressed
// Arrow files (lz4, zstd) are decompressed by dlarrow. Metadata goes from
// safetensors to safetensors and Arrow and back; .npy and .npz have none.
// Arrow holds int8..int64, uint8..uint64 and float16..float64: other types
// are refused with dlarrow's error.
//
// convert checks an .npz input against the CRC-32 of every member, mapped
// ones too (as tensorfile.OpenNPZ does by default and np.load does), and
// so does inspect --verify: a member whose bytes fail it fails the
// command. A plain inspect skips the mapped members
// (tensorfile.SkipMappedCRC) and shows them unchecked.
//
// Errors are the libraries' own messages, naming the field and value
// (docs/rejects-files.md lists them). The exit status is 0 on success, 1
// when a file could not be read or written or convert has nothing to
// write or would leave tensors out, and 2 for a usage error.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: tensorfile <command> [flags] [arguments]

Inspect and convert tensor files: .npy, .npz, safetensors and Arrow IPC.

commands:
  inspect [--json] FILE...      print each tensor's name, dtype, shape, bytes, layout, mapping, and the metadata
  convert [flags] IN OUT        write IN's tensors to OUT in OUT's format, streaming from a mapping of IN

Run "tensorfile <command> -h" for a command's flags.
`

// usageError is a mistake on the command line: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// run is the command: args without the program name. It returns the exit
// status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "inspect":
		err = inspect(args[1:], stdout, stderr)
	case "convert":
		err = convert(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		err = usagef("unknown command %q", args[0])
	}
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "tensorfile: %v\n", err)
		if !strings.HasPrefix(args[0], "-") && (args[0] == "inspect" || args[0] == "convert") {
			fmt.Fprintf(stderr, "run \"tensorfile %s -h\" for usage\n", args[0])
		} else {
			fmt.Fprint(stderr, usage)
		}
		return 2
	case errors.Is(err, errReported):
		return 1
	default:
		// data errors start with the file they are about, as gofmt's do
		fmt.Fprintln(stderr, err)
		return 1
	}
}

// errReported: the errors were already printed (inspect of several files).
var errReported = errors.New("errors reported")

// parseFlags parses fs over args, allowing flags after the positional
// arguments too (tensorfile inspect a.npy --json), and returns the
// positional ones. "--" ends the flags.
func parseFlags(fs *flag.FlagSet, args []string, stdout io.Writer) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(stdout)
				fs.Usage()
				return nil, err
			}
			return nil, &usageError{err.Error()}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		args = rest
		pos = append(pos, args[0])
		args = args[1:]
	}
}
