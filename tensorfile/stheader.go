package tensorfile

import (
	"cmp"
	"encoding/binary"
	"maps"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/godlpack/dlpack"
)

// stTensor is one tensor of a safetensors file to write.
type stTensor struct {
	name  string
	dtype dlpack.DataType
	shape []int64
}

// stLayout is a safetensors file laid out for writing: its first bytes
// (the 8-byte header length, then the header) and the order of its
// tensors' data.
type stLayout struct {
	head  []byte
	order []int // indices into the tensors given to layoutSafetensors, in data order
	data  int64 // the size of the data section
}

// layoutSafetensors lays out a safetensors file of tensors and metadata
// (nil: no __metadata__) as the reference writer, the safetensors crate,
// does, for WriteSafetensors and CreateSafetensors alike: the tensors by
// decreasing dtype in the crate's order (safetensorsOrder, by alignment),
// then by name, so each is aligned for its type; a header of
// "__metadata__" (keys sorted; the crate's order is its hash map's),
// then each tensor in data order, as {"dtype","shape","data_offsets"},
// strings escaped as serde_json escapes them (jsonString), no space. The
// header is padded with spaces until the data starts at a multiple of
// align bytes from the file's start: 8 makes the reference writer's file
// byte for byte, 64 is CreateSafetensors' padding. It refuses a repeated
// name, "__metadata__" as a name, a name or metadata string that is not
// valid UTF-8, a dtype safetensors has no name for, a bad shape, and a
// header longer than MaxSafetensorsHeader, which OpenSafetensors (and the
// reference reader) would refuse.
func layoutSafetensors(tensors []stTensor, metadata map[string]string, align int) (stLayout, error) {
	if err := checkText(metadata); err != nil {
		return stLayout{}, err
	}
	type item struct {
		i      int
		dtype  string
		rank   int
		nbytes int64
	}
	items := make([]item, len(tensors))
	seen := make(map[string]bool, len(tensors)+1)
	seen["__metadata__"] = true
	for i, t := range tensors {
		if seen[t.name] {
			return stLayout{}, fieldErr(ErrFormat, "name", t.name, "repeated or reserved")
		}
		if !utf8.ValidString(t.name) {
			return stLayout{}, fieldErr(ErrFormat, "name", strconv.Quote(t.name), notUTF8)
		}
		seen[t.name] = true
		name, rank, err := safetensorsName(t.dtype)
		if err != nil {
			return stLayout{}, err
		}
		n, _, err := layout("shape", t.shape, t.dtype.ItemSize(), false)
		if err != nil {
			return stLayout{}, err
		}
		items[i] = item{i: i, dtype: name, rank: rank, nbytes: n}
	}
	slices.SortFunc(items, func(a, b item) int {
		return cmp.Or(cmp.Compare(b.rank, a.rank), cmp.Compare(tensors[a.i].name, tensors[b.i].name))
	})
	lay := stLayout{order: make([]int, len(items))}
	h := make([]byte, 8, 64+64*len(items))
	h = append(h, '{')
	if metadata != nil {
		h = append(h, `"__metadata__":{`...)
		for i, k := range slices.Sorted(maps.Keys(metadata)) {
			if i > 0 {
				h = append(h, ',')
			}
			h = jsonString(h, k)
			h = append(h, ':')
			h = jsonString(h, metadata[k])
		}
		h = append(h, '}')
	}
	for i, it := range items {
		if i > 0 || metadata != nil {
			h = append(h, ',')
		}
		t := tensors[it.i]
		h = jsonString(h, t.name)
		h = append(h, `:{"dtype":"`...)
		h = append(h, it.dtype...)
		h = append(h, `","shape":[`...)
		for j, d := range t.shape {
			if j > 0 {
				h = append(h, ',')
			}
			h = strconv.AppendInt(h, d, 10)
		}
		if lay.data+it.nbytes < lay.data {
			return stLayout{}, fieldErr(ErrLayout, strconv.Quote(t.name)+".shape", t.shape, "the data section's size overflows int64")
		}
		h = append(h, `],"data_offsets":[`...)
		h = strconv.AppendInt(h, lay.data, 10)
		h = append(h, ',')
		lay.data += it.nbytes
		h = strconv.AppendInt(h, lay.data, 10)
		h = append(h, "]}"...)
		lay.order[i] = it.i
	}
	h = append(h, '}')
	for len(h)%align != 0 {
		h = append(h, ' ')
	}
	n := len(h) - 8
	if n > MaxSafetensorsHeader {
		return stLayout{}, fieldErr(ErrFormat, "header length", n, "over the 100 MB limit (MaxSafetensorsHeader) that OpenSafetensors and the safetensors crate enforce")
	}
	binary.LittleEndian.PutUint64(h, uint64(n))
	lay.head = h
	return lay, nil
}

// jsonString appends s (valid UTF-8) to b as a JSON string, escaped as
// serde_json (the safetensors crate's JSON) escapes it: '"' and '\\'
// with a backslash, \b \t \n \f \r by name, other control characters as
// \u00XX (lowercase hex), and everything else as it is: no HTML escaping
// of < > &, nor of U+2028 and U+2029 (encoding/json escapes both).
func jsonString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, '\\', 'b')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\f':
			b = append(b, '\\', 'f')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		start = i + 1
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
