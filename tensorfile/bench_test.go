package tensorfile_test

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
)

// sparseFile writes head and extends the file to size bytes with a hole:
// the data is never written (it reads as zeros).
func sparseFile(b *testing.B, name string, head []byte, size int64) string {
	p := filepath.Join(b.TempDir(), name)
	if err := os.WriteFile(p, head, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.Truncate(p, size); err != nil {
		b.Fatal(err)
	}
	return p
}

// benchFiles are a safetensors file of 4 float32 tensors and a .npy
// float32 array, each in a 1 KiB and a 1 GiB version.
func benchFiles(b *testing.B, total int64) map[string]string {
	per := total / 4 / 4 // float32 elements per tensor
	js := "{"
	for i := range int64(4) {
		if i > 0 {
			js += ","
		}
		js += fmt.Sprintf(`"t%d":{"dtype":"F32","shape":[%d],"data_offsets":[%d,%d]}`, i, per, i*per*4, (i+1)*per*4)
	}
	st := stBytes(js+"}", nil)
	// a header like a model's: 1000 small tensors
	many := "{"
	for i := range 1000 {
		if i > 0 {
			many += ","
		}
		many += fmt.Sprintf(`"model.layers.%d.mlp.weight_%d":{"dtype":"F32","shape":[4,4],"data_offsets":[%d,%d]}`, i/10, i%10, i*64, (i+1)*64)
	}
	mf := stBytes(many+"}", nil)
	names := stBytes(modelHeader(10_000), nil)
	npy := npyBytes(fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }", total/4), nil)
	return map[string]string{
		"safetensors": sparseFile(b, "b.safetensors", st, int64(len(st))+4*per*4),
		"npy":         sparseFile(b, "b.npy", npy, int64(len(npy))+total),
		"many":        sparseFile(b, "many.safetensors", mf, int64(len(mf))+1000*64),
		"names":       sparseFile(b, "names.safetensors", names, int64(len(names))+10_000*64),
	}
}

// modelHeader is the JSON header of n float32 4x4 tensors named as a
// model's layers are (bench/tensorfiles.py writes the same).
func modelHeader(n int) string {
	var sb strings.Builder
	sb.WriteByte('{')
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `"model.layers.%d.mlp.weight_%d":{"dtype":"F32","shape":[4,4],"data_offsets":[%d,%d]}`, i/10, i%10, i*64, (i+1)*64)
	}
	sb.WriteByte('}')
	return sb.String()
}

// benchPaths returns the files of benchFiles, or with TENSORFILE_BENCH_DIR
// set (make compare), the same files made by bench/tensorfiles.py there.
func benchPaths(b *testing.B, name string, total int64) map[string]string {
	if dir := os.Getenv("TENSORFILE_BENCH_DIR"); dir != "" {
		return map[string]string{
			"safetensors": filepath.Join(dir, "b-"+name+".safetensors"),
			"npy":         filepath.Join(dir, "b-"+name+".npy"),
			"many":        filepath.Join(dir, "many.safetensors"),
			"names":       filepath.Join(dir, "names.safetensors"),
		}
	}
	return benchFiles(b, total)
}

func openExport(b *testing.B, open func(string, ...tensorfile.Option) (*tensorfile.File, error), path string) {
	f, err := open(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, t := range f.Tensors() {
		x, err := dlpack.From(t)
		if err != nil {
			b.Fatal(err)
		}
		x.Close()
	}
	f.Close()
}

// BenchmarkOpenExportRatio alternates the 1 KiB and the 1 GiB file in one
// loop, so both meet the same machine load, and reports their ratio
// (1GiB/1KiB, at most 1.2 expected) beside the time of each.
func BenchmarkOpenExportRatio(b *testing.B) {
	small, large := benchPaths(b, "1KiB", 1<<10), benchPaths(b, "1GiB", 1<<30)
	for _, format := range []string{"safetensors", "npy"} {
		b.Run(format, func(b *testing.B) {
			open := tensorfile.OpenSafetensors
			if format == "npy" {
				open = tensorfile.OpenNPY
			}
			var ts, tl time.Duration
			n := 0
			for b.Loop() {
				t0 := time.Now()
				openExport(b, open, small[format])
				t1 := time.Now()
				openExport(b, open, large[format])
				ts += t1.Sub(t0)
				tl += time.Since(t1)
				n++
			}
			b.ReportMetric(float64(ts.Nanoseconds())/float64(n), "ns/1KiB")
			b.ReportMetric(float64(tl.Nanoseconds())/float64(n), "ns/1GiB")
			b.ReportMetric(float64(tl)/float64(ts), "1GiB/1KiB")
		})
	}
}

// BenchmarkOpenExport opens a file, exports every tensor in it with
// dlpack.From, releases them and closes the file. The 1 GiB and the 1 KiB
// versions should cost the same: nothing reads the data. The last case is
// a safetensors file with a header like a model's: 1000 tensors.
func BenchmarkOpenExport(b *testing.B) {
	defer b.Run("safetensors/1000tensors", func(b *testing.B) {
		p := benchPaths(b, "1KiB", 1<<10)["many"]
		for b.Loop() {
			openExport(b, tensorfile.OpenSafetensors, p)
		}
	})
	for _, size := range []struct {
		name  string
		bytes int64
	}{{"1KiB", 1 << 10}, {"1GiB", 1 << 30}} {
		files := benchPaths(b, size.name, size.bytes)
		for _, format := range []string{"safetensors", "npy"} {
			b.Run(format+"/"+size.name, func(b *testing.B) {
				open := tensorfile.OpenSafetensors
				if format == "npy" {
					open = tensorfile.OpenNPY
				}
				for b.Loop() {
					openExport(b, open, files[format])
				}
			})
		}
	}
}

// BenchmarkOpenNames opens a safetensors file of 10,000 tensors, reads
// every name and closes it: what safetensors' safe_open and keys() do
// (bench/tensorfiles.py times that on the same file for make compare).
func BenchmarkOpenNames(b *testing.B) {
	p := benchPaths(b, "1KiB", 1<<10)["names"]
	n := 0
	for b.Loop() {
		f, err := tensorfile.OpenSafetensors(p)
		if err != nil {
			b.Fatal(err)
		}
		for _, t := range f.Tensors() {
			n += len(t.Name())
		}
		f.Close()
	}
	if n == 0 {
		b.Fatal("no names")
	}
}

// BenchmarkWriteNPY writes a 16 MiB float64 tensor to io.Discard from a
// mapped file (read in guarded 1 MiB chunks, so that a truncation of the
// file is an error, not a crash) and from Go memory (written straight from
// its memory): the difference is the price of the guard and the chunk
// copies.
func BenchmarkWriteNPY(b *testing.B) {
	const n = 2 << 20
	path := filepath.Join(b.TempDir(), "a.npy")
	if err := os.WriteFile(path, f64npy(n), 0o644); err != nil {
		b.Fatal(err)
	}
	f, err := tensorfile.OpenNPY(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	mem := dlpack.NewArray(make([]float64, n), []int64{n})
	for name, src := range map[string]dlpack.Producer{"mapped": f.Tensors()[0], "memory": mem} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(8 * n)
			for b.Loop() {
				if err := tensorfile.WriteNPY(io.Discard, src); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkOpenNPZ opens an archive of four 64 MiB float32 members written
// aligned (all mapped): checked at open (the default: every member read
// once), with LazyMappedCRC (nothing read), and with LazyMappedCRC
// taking one member (that member read once, on its export).
func BenchmarkOpenNPZ(b *testing.B) {
	const per = 16 << 20 // float32 elements: 64 MiB per member
	var named []tensorfile.Named
	for i := range 4 {
		x := make([]float32, per)
		for j := range x {
			x[j] = float32(i*per + j)
		}
		named = append(named, tensorfile.Named{Name: fmt.Sprint("m", i), Tensor: dlpack.NewArray(x, nil)})
	}
	p := filepath.Join(b.TempDir(), "big.npz")
	w, err := os.Create(p)
	if err != nil {
		b.Fatal(err)
	}
	if err := tensorfile.WriteNPZ(w, named, false); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opts []tensorfile.Option
		use  bool
	}{
		{"checked", nil, false},
		{"lazy", []tensorfile.Option{tensorfile.LazyMappedCRC()}, false},
		{"lazy-one-member", []tensorfile.Option{tensorfile.LazyMappedCRC()}, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				f, err := tensorfile.OpenNPZ(p, c.opts...)
				if err != nil {
					b.Fatal(err)
				}
				if c.use {
					x, err := dlpack.From(f.Tensors()[0])
					if err != nil {
						b.Fatal(err)
					}
					x.Close()
				}
				f.Close()
			}
		})
	}
}
