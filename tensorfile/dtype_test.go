package tensorfile_test

import (
	"bytes"
	"slices"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/tensorfile"
)

// F8_E4M3FNUZ and F8_E5M2FNUZ, as the safetensors package writes them
// from ml_dtypes arrays, read as DLPack's float8_e4m3fnuz and
// float8_e5m2fnuz, and are written back under the same names, as
// safetensors.numpy.save writes the same arrays: F8_E5M2FNUZ first, the
// later type in the crate's order (the peer tests check both ways against
// safetensors and ml_dtypes).
func TestSafetensorsFNUZ(t *testing.T) {
	noLiveMappings(t)
	data := []byte{0x00, 0x80, 0x7f, 0x01, 0xff, 0x40, 0x3c, 0x81}
	js := `{"a":{"dtype":"F8_E4M3FNUZ","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"F8_E5M2FNUZ","shape":[2,2],"data_offsets":[4,8]}}`
	f, err := tensorfile.OpenSafetensors(writeTemp(t, "fnuz.safetensors", stBytes(js, data)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]dlpack.DataType{"a": dlpack.Float8E4M3FNUZ, "b": dlpack.Float8E5M2FNUZ}
	for _, tn := range f.Tensors() {
		if tn.DataType() != want[tn.Name()] {
			t.Errorf("%s: %v, want %v", tn.Name(), tn.DataType(), want[tn.Name()])
		}
	}
	var out bytes.Buffer
	if err := tensorfile.WriteSafetensors(&out, []tensorfile.Named{{Name: "a", Tensor: f.Tensors()[0]}, {Name: "b", Tensor: f.Tensors()[1]}}, nil); err != nil {
		t.Fatal(err)
	}
	saved := `{"b":{"dtype":"F8_E5M2FNUZ","shape":[2,2],"data_offsets":[0,4]},"a":{"dtype":"F8_E4M3FNUZ","shape":[4],"data_offsets":[4,8]}}`
	if wantFile := stBytes(saved, slices.Concat(data[4:], data[:4])); !bytes.Equal(out.Bytes(), wantFile) {
		t.Errorf("wrote %q, want %q", out.Bytes(), wantFile)
	}
}
