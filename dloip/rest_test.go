package dloip

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/minifloat"
	"google.golang.org/grpc/codes"
)

// serveREST starts a server on loopback serving both bindings; it
// returns the server and the REST base URL.
func serveREST(t testing.TB, opts Options, models ...Model) (*Server, string) {
	t.Helper()
	s, _, base := serveBoth(t, opts, models...)
	return s, base
}

// serveBoth is serveREST, returning the gRPC address too.
func serveBoth(t testing.TB, opts Options, models ...Model) (*Server, string, string) {
	t.Helper()
	s, addr := serve(t, opts, models...)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.ServeREST(lis) }()
	t.Cleanup(func() {
		s.Shutdown()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	scheme := "http://"
	if opts.TLS != nil {
		scheme = "https://"
	}
	return s, addr, scheme + lis.Addr().String()
}

func dialREST(t testing.TB, base string, opts ClientOptions) *RESTClient {
	t.Helper()
	c, err := DialREST(base, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// sameValues reports whether a and b, tensors of datatype, hold the same
// values: bit for bit, or with JSON (nanAny) every NaN equal to any
// other, JSON having no NaN payloads.
func sameValues(datatype string, a, b []byte, nanAny bool) bool {
	if bytes.Equal(a, b) {
		return true
	}
	if !nanAny || len(a) != len(b) {
		return false
	}
	isNaN := func(x []byte) bool {
		switch datatype {
		case "FP16":
			return minifloat.Float16(binary.LittleEndian.Uint16(x)).IsNaN()
		case "BF16":
			return minifloat.BFloat16(binary.LittleEndian.Uint16(x)).IsNaN()
		case "FP32":
			return math.IsNaN(float64(math.Float32frombits(binary.LittleEndian.Uint32(x))))
		case "FP64":
			return math.IsNaN(math.Float64frombits(binary.LittleEndian.Uint64(x)))
		}
		return false
	}
	dt, _ := ParseDatatype(datatype)
	size := dt.ItemSize()
	for i := 0; i < len(a); i += size {
		if !bytes.Equal(a[i:i+size], b[i:i+size]) && !(isNaN(a[i:i+size]) && isNaN(b[i:i+size])) {
			return false
		}
	}
	return true
}

// Our REST client against our REST server, binary data both ways and
// JSON both ways: every datatype at every shape, random bit patterns,
// and text; bit for bit (JSON: every NaN a NaN, its payload lost).
func TestRESTRoundTrip(t *testing.T) {
	_, base := serveREST(t, Options{}, dynamicEcho())
	for _, mode := range []string{"binary", "JSON"} {
		c := dialREST(t, base, ClientOptions{})
		if mode == "JSON" {
			c = c.WithJSON()
		}
		ctx := ctxT(t)
		n := 0
		for _, shape := range peerShapes {
			for _, d := range Datatypes() {
				dt, _ := ParseDatatype(d)
				x := newRaw(t, dt, shape...)
				id := fmt.Sprint(d, shape)
				resp, err := c.Infer(ctx, &InferRequest{Model: "echo", ID: id, Inputs: []Input{{Name: "x_" + d, Tensor: x}}})
				if err != nil {
					t.Fatalf("%s: %s %v: %v", mode, d, shape, err)
				}
				out := resp.Output("x_" + d)
				if out == nil || !sameValues(d, out.Bytes(), x.data, mode == "JSON") || fmt.Sprint(out.Shape()) != fmt.Sprint(shape) || out.DataType() != dt || resp.ID != id {
					t.Fatalf("%s: %s %v: the output differs from the input", mode, d, shape)
				}
				if out.IsCopied() != (mode == "JSON") || out.Aligned() != true {
					t.Fatalf("%s: %s %v: IsCopied %v, aligned %v", mode, d, shape, out.IsCopied(), out.Aligned())
				}
				resp.Close()
				n++
			}
		}
		text := peerText
		if mode == "JSON" {
			text = text[:3] // JSON strings are text: no binary bytes
		}
		texts := restBytesCases(t, c, ctx, "echo", text, nil, nil)
		t.Logf("%s both ways: %d tensors and %d BYTES tensors of text bit for bit", mode, n, texts)
	}
}

// restShapes are the shapes of restBytesCases.
var restShapes = [][]int64{{0}, {1}, {5}, {2, 3}}

// restBytesCases is bytesCases for a RESTClient, at shapes (restShapes
// when nil), the output's shape the one answer gives (the same when
// nil).
func restBytesCases(t *testing.T, c *RESTClient, ctx context.Context, model string, text [][]byte, shapes [][]int64, answer func([]int64) []int64) int {
	t.Helper()
	if shapes == nil {
		shapes = restShapes
	}
	if answer == nil {
		answer = func(s []int64) []int64 { return s }
	}
	n := 0
	for _, shape := range shapes {
		k := int(shape[0])
		if len(shape) > 1 {
			k *= int(shape[1])
		}
		bt := &BytesTensor{Shape: shape}
		for i := range k {
			bt.Elements = append(bt.Elements, text[i%len(text)])
		}
		resp, err := c.Infer(ctx, &InferRequest{Model: model, Inputs: []Input{{Name: "text", Tensor: bt}}})
		if err != nil {
			t.Fatalf("BYTES %v: %v", shape, err)
		}
		out := resp.Output("text")
		if out == nil || out.Datatype() != BYTES || fmt.Sprint(out.Shape()) != fmt.Sprint(answer(shape)) || len(out.Elements()) != k {
			t.Fatalf("BYTES %v: the output differs from the input", shape)
		}
		for i, e := range out.Elements() {
			if !bytes.Equal(e, bt.Elements[i]) {
				t.Fatalf("BYTES %v: element %d differs", shape, i)
			}
		}
		resp.Close()
		n++
	}
	return n
}

// The health, metadata and error endpoints, and what a request that
// breaks the protocol gets: each its HTTP status and {"error": ...}.
func TestRESTEndpoints(t *testing.T) {
	x := TensorMetadata{Name: "x", Datatype: "FP32", Shape: []int64{-1, 4}}
	s, base := serveREST(t, Options{Name: "srv", Version: "7"}, echoModel("m", x))
	c := dialREST(t, base, ClientOptions{})
	ctx := ctxT(t)
	if live, err := c.ServerLive(ctx); !live || err != nil {
		t.Fatal(live, err)
	}
	if ready, err := c.ServerReady(ctx); !ready || err != nil {
		t.Fatal(ready, err)
	}
	if ready, err := c.ModelReady(ctx, "m", "1"); !ready || err != nil {
		t.Fatal(ready, err)
	}
	ready, err := c.ModelReady(ctx, "nope", "")
	wantStatus(t, err, codes.NotFound, "nope")
	if ready {
		t.Fatal("an unknown model is ready")
	}
	_, err = c.ModelReady(ctx, "m", "2")
	wantStatus(t, err, codes.NotFound, "no version")
	sm, err := c.ServerMetadata(ctx)
	if err != nil || sm.Name != "srv" || sm.Version != "7" || fmt.Sprint(sm.Extensions) != "[binary_tensor_data]" {
		t.Fatal(sm, err)
	}
	mm, err := c.ModelMetadata(ctx, "m", "")
	if err != nil || mm.Name != "m" || len(mm.Inputs) != 1 || fmt.Sprint(mm.Inputs[0]) != fmt.Sprint(TensorMetadata{Name: "x", Datatype: "FP32", Shape: []int64{-1, 4}}) || mm.Platform != "go" {
		t.Fatal(mm, err)
	}
	for _, tc := range []struct {
		method, path, body string
		code               int
		parts              []string
	}{
		{"GET", "/v2/nothing", "", 404, []string{"no endpoint"}},
		{"POST", "/v2/health/live", "", 405, []string{"takes GET"}},
		{"GET", "/v2/models/m/infer", "", 405, []string{"takes POST"}},
		{"POST", "/v2/models/nope/infer", "{}", 404, []string{`"nope"`}},
		{"POST", "/v2/models/m/infer", "{", 400, []string{"JSON at byte 1"}},
		{"POST", "/v2/models/m/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3]}]}`, 400, []string{`input "x": data = 3 values`, "4 elements"}},
		{"POST", "/v2/models/m/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,"a"]}]}`, 400, []string{`input "x"`, "element 3"}},
		{"POST", "/v2/models/m/infer", `{"inputs":[{"name":"x","datatype":"FP64","shape":[1,4],"data":[1,2,3,4]}]}`, 400, []string{`input "x": datatype = FP64`}},
		{"POST", "/v2/models/m/infer", `{"inputs":[{"name":"y","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]}`, 400, []string{`input = "y"`}},
		{"POST", "/v2/models/m/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}],"outputs":[{"name":"z"}]}`, 400, []string{`output = "z"`}},
		{"POST", "/v2/models/m/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4],"data":[1,2,3,4]}]}`, 400, []string{`"data" given twice`}},
		{"POST", "/v2/models/m/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4]}]}`, 400, []string{`input "x"`, "no data"}},
		{"POST", "/v2/models/m/infer", `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"parameters":{"binary_data_size":16}}]}`, 400, []string{HeaderInferenceContentLength}},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || resp.Header.Get("Content-Type") != "application/json" || !strings.HasPrefix(string(b), `{"error":`) {
			t.Fatalf("%s %s %s: %d %s", tc.method, tc.path, tc.body, resp.StatusCode, b)
		}
		for _, p := range tc.parts {
			if !strings.Contains(string(b), strings.ReplaceAll(p, `"`, `\"`)) {
				t.Fatalf("%s %s %s: %s lacks %q", tc.method, tc.path, tc.body, b, p)
			}
		}
		t.Logf("%s %s: %d %s", tc.method, tc.path, resp.StatusCode, b)
	}
	s.Shutdown()
	if _, err := c.ServerLive(ctx); err == nil {
		t.Fatal("live after Shutdown")
	}
}

// JSON values as the server reads and writes them: nested arrays read
// flat, every float rounded once to its type (ties to even; beyond the
// range an infinity) and written back so that it reads as the same
// bits, NaN and the infinities as words, a negative zero as -0.0, the
// integer types' extremes, strings with escapes. A BYTES output that is
// not UTF-8 has no JSON string: 400 naming the element, and the same
// output as binary data.
func TestRESTJSONValues(t *testing.T) {
	notText := ModelFunc(ModelMetadata{Name: "bin", Inputs: []TensorMetadata{{Name: "x", Datatype: "BOOL", Shape: []int64{1}}},
		Outputs: []TensorMetadata{{Name: "b", Datatype: BYTES, Shape: []int64{2}}}}, func(context.Context, *Request) ([]Output, error) {
		return []Output{{Name: "b", Tensor: &BytesTensor{Shape: []int64{2}, Elements: [][]byte{[]byte("ok"), {0xff, 0}}}}}, nil
	})
	_, base := serveREST(t, Options{}, dynamicEcho(), notText)
	post := func(model, body string) (int, string) {
		resp, err := http.Post(base+"/v2/models/"+model+"/infer", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct{ datatype, shape, in, out string }{
		{"FP32", "[2,3]", `[[0.1,-0.0,1e2],[NaN,-Infinity,3.4028235e38]]`, `[0.1,-0.0,100,NaN,-Infinity,3.4028235e+38]`},
		{"FP16", "[5]", `[0.1,65504,65520,6e-8,-2.5]`, `[0.099975586,65504,Infinity,5.9604645e-08,-2.5]`},
		{"BF16", "[3]", `[0.1,3.14159,1e38]`, `[0.100097656,3.140625,9.96921e+37]`},
		{"FP64", "[3]", `[0.1,1e-320,-1.7976931348623157e308]`, `[0.1,1e-320,-1.7976931348623157e+308]`},
		{"INT64", "[3]", `[-9223372036854775808,9223372036854775807,0]`, `[-9223372036854775808,9223372036854775807,0]`},
		{"UINT64", "[2]", `[18446744073709551615,0]`, `[18446744073709551615,0]`},
		{"INT8", "[2]", `[-128,127]`, `[-128,127]`},
		{"UINT16", "[]", `[65535]`, `[65535]`},
		{"BOOL", "[2]", `[true,false]`, `[true,false]`},
		{BYTES, "[3]", `["a\"b\\c","\u00e9\ud83d\ude00","\u0001\n"]`, `["a\"b\\c","é😀","\u0001\n"]`},
	} {
		code, got := post("echo", fmt.Sprintf(`{"inputs":[{"name":"a","datatype":%q,"shape":%s,"data":%s}]}`, tc.datatype, tc.shape, tc.in))
		want := fmt.Sprintf(`{"model_name":"echo","model_version":"","outputs":[{"name":"a","datatype":%q,"shape":%s,"data":%s}]}`, tc.datatype, tc.shape, tc.out)
		if code != 200 || got != want {
			t.Fatalf("%s %s:\ngot  %d %s\nwant %s", tc.datatype, tc.in, code, got, want)
		}
	}
	code, got := post("bin", `{"inputs":[{"name":"x","datatype":"BOOL","shape":[1],"data":[true]}]}`)
	if code != 400 || !strings.Contains(got, `output \"b\": element 1`) || !strings.Contains(got, "binary data") {
		t.Fatalf("%d %s", code, got)
	}
	resp, err := dialREST(t, base, ClientOptions{}).Infer(ctxT(t), &InferRequest{Model: "bin", Inputs: []Input{{Name: "x", Tensor: newRaw(t, dlpack.Bool, 1)}}})
	if err != nil || !bytes.Equal(resp.Output("b").Elements()[1], []byte{0xff, 0}) {
		t.Fatal(err)
	}
	resp.Close()
}
