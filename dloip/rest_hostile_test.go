package dloip

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/godlpack/dlpack/dlgrpc/dlgrpctest"
)

// restHostile is a REST request, as bytes on the wire, that lies to a
// server whose model "m" takes "a" (FP32, any length) and whose Dynamic
// model "echo" takes anything: the status it must get and words its
// error must have. cut: the request ends there (the client closes its
// side), short of the length it declared.
type restHostile struct {
	name  string
	wire  []byte
	cut   bool
	code  int
	parts []string
}

// restWire is a POST to path with the headers and body; length, when
// not -1, is the Content-Length said instead of the body's.
func restWire(path string, headers map[string]string, body []byte, length int) []byte {
	if length < 0 {
		length = len(body)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n", path, length)
	for k, v := range headers {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n")
	b.Write(body)
	return b.Bytes()
}

func hostileRESTRequests() []restHostile {
	in := func(datatype string, shape string, rest string) []byte {
		return []byte(fmt.Sprintf(`{"inputs":[{"name":"a","datatype":%q,"shape":%s%s}]}`, datatype, shape, rest))
	}
	post := func(body []byte) []byte { return restWire("/v2/models/m/infer", nil, body, -1) }
	echo := func(body []byte) []byte { return restWire("/v2/models/echo/infer", nil, body, -1) }
	bin := func(json []byte, bins []byte, length int) []byte {
		return restWire("/v2/models/m/infer", map[string]string{HeaderInferenceContentLength: fmt.Sprint(len(json))}, append(json, bins...), length)
	}
	deep := strings.Repeat("[", 100) + "1" + strings.Repeat("]", 100)
	many := `{"inputs":[{"name":"a","datatype":"FP32","shape":[1],"data":[1],"parameters":{`
	for i := range restMaxParams + 1 {
		if i > 0 {
			many += ","
		}
		many += fmt.Sprintf(`"k%d":1`, i)
	}
	many += "}}]}"
	binA := in("FP32", "[262144]", `,"parameters":{"binary_data_size":1048576}`)
	return []restHostile{
		// a shape of 2^28 elements (1 GiB) and no data: counted, not
		// allocated
		{name: "huge shape, no data", wire: post(in("FP32", "[268435456]", "")), code: 400, parts: []string{`input \"a\" = no data`}},
		{name: "huge shape, little data", wire: post(in("FP32", "[268435456]", `,"data":[1,2]`)), code: 400, parts: []string{"at most 3 values", "268435456 elements"}},
		{name: "huge shape, little text", wire: echo(in("BYTES", "[268435456]", `,"data":["a"]`)), code: 400, parts: []string{"at most 2 strings"}},
		{name: "shape beyond MaxTensorBytes", wire: post(in("FP32", "[2147483648]", "")), code: 413, parts: []string{`input \"a\"`, "MaxTensorBytes"}},
		{name: "overflowing shape", wire: post(in("FP32", "[1099511627776,1099511627776]", "")), code: 400, parts: []string{"overflows"}},
		{name: "too many dimensions", wire: post(in("FP32", "["+strings.Repeat("1,", 64)+"1]", "")), code: 400, parts: []string{"more than 64 dimensions"}},
		{name: "unknown datatype", wire: echo(in("FP8", "[2]", `,"data":[1,2]`)), code: 400, parts: []string{"FP8"}},
		{name: "more values than the shape", wire: post(in("FP32", "[2]", `,"data":[1,2,3]`)), code: 400, parts: []string{"more values than the 2"}},
		{name: "integer out of range", wire: echo(in("INT8", "[1]", `,"data":[300]`)), code: 400, parts: []string{"out of range for INT8"}},
		{name: "a number JSON has not", wire: post(in("FP32", "[1]", `,"data":[01]`)), code: 400, parts: []string{"want ',' or ']'"}},
		{name: "nested too deep", wire: post(in("FP32", "[1]", `,"data":`+deep)), code: 400, parts: []string{"nested more than 72 deep"}},
		{name: "too many parameters", wire: post([]byte(many)), code: 400, parts: []string{"more than 1024 parameters"}},
		{name: "a key given twice", wire: post([]byte(`{"inputs":[],"inputs":[]}`)), code: 400, parts: []string{`\"inputs\" given twice`}},
		{name: "unterminated", wire: post([]byte(`{"inputs":[{"name":"a`)), code: 400, parts: []string{"unterminated string"}},
		{name: "not UTF-8", wire: post([]byte("{\"inputs\":[{\"name\":\"\xff\",\"datatype\":\"FP32\",\"shape\":[0],\"data\":[]}]}")), code: 400, parts: []string{"not UTF-8"}},
		{name: "a lone surrogate", wire: post([]byte(`{"inputs":[{"name":"\ud800","datatype":"FP32","shape":[0],"data":[]}]}`)), code: 400, parts: []string{"lone UTF-16 surrogate"}},
		{name: "lying binary size", wire: bin(in("FP32", "[2]", `,"parameters":{"binary_data_size":7}`), make([]byte, 7), -1), code: 400, parts: []string{"binary_data_size = 7", "needs 8 bytes"}},
		{name: "binary data beyond the body", wire: bin(in("FP32", "[2]", `,"parameters":{"binary_data_size":8}`), make([]byte, 4), -1), code: 400, parts: []string{"Content-Length", "make"}},
		{name: "header length beyond the body", wire: restWire("/v2/models/m/infer", map[string]string{HeaderInferenceContentLength: "1000"}, []byte("{}"), -1), code: 400,
			parts: []string{"Inference-Header-Content-Length = 1000", "the body has 2 bytes"}},
		{name: "header length beyond MaxMessageBytes", wire: restWire("/v2/models/m/infer", map[string]string{HeaderInferenceContentLength: "1099511627776"}, []byte("{}"), -1), code: 413,
			parts: []string{"MaxMessageBytes"}},
		{name: "header length not a number", wire: restWire("/v2/models/m/infer", map[string]string{HeaderInferenceContentLength: "-1"}, []byte("{}"), -1), code: 400,
			parts: []string{"not a byte count"}},
		{name: "Content-Length beyond MaxMessageBytes", wire: restWire("/v2/models/m/infer", nil, []byte("{}"), 1<<40), cut: true, code: 413, parts: []string{"Content-Length", "MaxMessageBytes"}},
		{name: "lying BYTES lengths", wire: restWire("/v2/models/echo/infer", map[string]string{HeaderInferenceContentLength: fmt.Sprint(len(in("BYTES", "[1]", `,"parameters":{"binary_data_size":8}`)))},
			append(in("BYTES", "[1]", `,"parameters":{"binary_data_size":8}`), 200, 0, 0, 0, 'a', 'b', 'c', 'd'), -1), code: 400, parts: []string{"element 0: length = 200"}},
		{name: "compressed", wire: restWire("/v2/models/m/infer", map[string]string{"Content-Encoding": "gzip"}, []byte("{}"), -1), code: 415, parts: []string{"Content-Encoding"}},
		// the binary data declared and not sent: what was allocated for
		// it is freed when the body ends
		{name: "body cut short", wire: bin(binA, make([]byte, 10), len(binA)+1<<20), cut: true, code: 400, parts: []string{"the body ends before them"}},
	}
}

// sendREST sends wire on a new connection to addr (closing its side
// after, if cut) and reads the answer.
func sendREST(addr string, wire []byte, cut bool) (*http.Response, []byte, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write(wire); err != nil && !cut {
		return nil, nil, err
	}
	if cut {
		conn.(*net.TCPConn).CloseWrite()
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// A server with the zero Options gives every hostile REST request a
// clear status and {"error": ...}, and serves on: nothing of a size a
// request only declares is allocated.
func TestRESTHostileRequestsZeroOptions(t *testing.T) {
	alloc := &countingAllocator{}
	_, base := serveREST(t, Options{Allocator: alloc, Logger: quiet}, echoModel("m", TensorMetadata{Name: "a", Datatype: "FP32", Shape: []int64{-1}}), dynamicEcho())
	addr := strings.TrimPrefix(base, "http://")
	good := restWire("/v2/models/m/infer", nil, []byte(`{"inputs":[{"name":"a","datatype":"FP32","shape":[2],"data":[1,2]}]}`), -1)
	for _, tc := range hostileRESTRequests() {
		resp, body, err := sendREST(addr, tc.wire, tc.cut)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if resp.StatusCode != tc.code || !bytes.HasPrefix(body, []byte(`{"error":`)) {
			t.Fatalf("%s: %d %s, want %d", tc.name, resp.StatusCode, body, tc.code)
		}
		for _, p := range tc.parts {
			if !strings.Contains(string(body), p) {
				t.Fatalf("%s: %s lacks %q", tc.name, body, p)
			}
		}
		t.Logf("%s: %d %s", tc.name, resp.StatusCode, body)
		if n := alloc.out.Load(); n != 0 {
			t.Fatalf("%s: %d bytes of received bodies held", tc.name, n)
		}
		if resp, body, err := sendREST(addr, good, false); err != nil || resp.StatusCode != 200 {
			t.Fatalf("after %s: %v %s", tc.name, err, body)
		}
		// the good request's input is released once its handler
		// returns, which may be just after its answer arrived
		for i := 0; alloc.out.Load() != 0 && i < 200; i++ {
			time.Sleep(5 * time.Millisecond)
		}
		if n := alloc.out.Load(); n != 0 {
			t.Fatalf("after %s: the good request's %d bytes held", tc.name, n)
		}
	}
}

// 10,000 hostile REST requests against a server with the zero Options:
// each gets its status, and the process stays within the heap bounds.
func TestRESTHostileRequestsHeap(t *testing.T) {
	_, base := serveREST(t, Options{Logger: quiet}, echoModel("m", TensorMetadata{Name: "a", Datatype: "FP32", Shape: []int64{-1}}), dynamicEcho())
	addr := strings.TrimPrefix(base, "http://")
	cases := hostileRESTRequests()
	dlgrpctest.HeapRun(t, func(i int) error {
		tc := cases[i%len(cases)]
		resp, body, err := sendREST(addr, tc.wire, tc.cut)
		if err != nil {
			return fmt.Errorf("%s: %w", tc.name, err)
		}
		if resp.StatusCode != tc.code {
			return fmt.Errorf("%s: %d %s", tc.name, resp.StatusCode, body)
		}
		return nil
	})
}

// hostileRESTResponses are REST answers that lie to a client: each a
// handler writing it, the error the client's Infer must wrap and words
// it must have.
func hostileRESTResponses() []struct {
	name  string
	h     func(w http.ResponseWriter)
	is    error
	parts []string
} {
	jsonAnswer := func(body string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, body)
		}
	}
	out := func(datatype, shape, rest string) string {
		return fmt.Sprintf(`{"model_name":"m","outputs":[{"name":"y","datatype":%q,"shape":%s%s}]}`, datatype, shape, rest)
	}
	bin := func(json string, bins []byte, length int) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			w.Header().Set(HeaderInferenceContentLength, fmt.Sprint(len(json)))
			if length < 0 {
				length = len(json) + len(bins)
			}
			w.Header().Set("Content-Length", fmt.Sprint(length))
			io.WriteString(w, json)
			w.Write(bins)
		}
	}
	return []struct {
		name  string
		h     func(w http.ResponseWriter)
		is    error
		parts []string
	}{
		{"huge shape, no data", jsonAnswer(out("FP32", "[268435456]", "")), ErrInvalid, []string{`output "y" = no data`}},
		{"huge shape, little data", jsonAnswer(out("FP32", "[268435456]", `,"data":[1,2]`)), ErrInvalid, []string{"at most 3 values"}},
		{"shape beyond MaxTensorBytes", jsonAnswer(out("FP32", "[2147483648]", "")), ErrLimit, []string{`output "y"`, "MaxTensorBytes"}},
		{"overflowing shape", jsonAnswer(out("FP32", "[1099511627776,1099511627776]", "")), ErrShape, []string{"overflows"}},
		{"unknown datatype", jsonAnswer(out("FP8", "[2]", `,"data":[1,2]`)), ErrDatatype, []string{"FP8"}},
		{"lying binary size", bin(out("FP32", "[2]", `,"parameters":{"binary_data_size":7}`), make([]byte, 7), -1), ErrInvalid, []string{"binary_data_size = 7"}},
		{"binary data beyond the body", bin(out("FP32", "[2]", `,"parameters":{"binary_data_size":8}`), make([]byte, 4), -1), ErrInvalid, []string{"Content-Length"}},
		{"Content-Length beyond MaxMessageBytes", bin(out("FP32", "[2]", `,"parameters":{"binary_data_size":8}`), make([]byte, 8), 1<<40), ErrLimit, []string{"MaxMessageBytes"}},
		{"body cut short", bin(out("FP32", "[262144]", `,"parameters":{"binary_data_size":1048576}`), make([]byte, 10), len(out("FP32", "[262144]", `,"parameters":{"binary_data_size":1048576}`))+1<<20),
			ErrInvalid, []string{"the body ends before them"}},
		{"malformed JSON", jsonAnswer(`{"outputs":[`), ErrInvalid, []string{"JSON at byte 12"}},
	}
}

// A client with the zero ClientOptions fails every hostile REST answer
// with an error wrapping the sentinel that says why, allocates nothing
// of a size only declared, and holds nothing afterwards.
func TestRESTHostileServerZeroOptions(t *testing.T) {
	cases := hostileRESTResponses()
	var next atomic.Int32
	base := hostileRESTServer(t, func(w http.ResponseWriter) { cases[next.Load()].h(w) })
	alloc := &countingAllocator{}
	c := dialREST(t, base, ClientOptions{Allocator: alloc})
	for i, tc := range cases {
		next.Store(int32(i))
		_, err := c.Infer(ctxT(t), &InferRequest{Model: "m"})
		if !errors.Is(err, tc.is) {
			t.Fatalf("%s: got %v, want %v", tc.name, err, tc.is)
		}
		for _, p := range tc.parts {
			if !strings.Contains(err.Error(), p) {
				t.Fatalf("%s: %q lacks %q", tc.name, err, p)
			}
		}
		if n := alloc.out.Load(); n != 0 {
			t.Fatalf("%s: %d bytes of received bodies held", tc.name, n)
		}
		t.Logf("%s: %v", tc.name, err)
	}
}

// 10,000 hostile REST answers to a client with the zero ClientOptions:
// each fails its Infer with its sentinel, within the heap bounds.
func TestRESTHostileResponsesHeap(t *testing.T) {
	cases := hostileRESTResponses()
	var next atomic.Int32
	base := hostileRESTServer(t, func(w http.ResponseWriter) { cases[next.Load()].h(w) })
	c := dialREST(t, base, ClientOptions{})
	ctx := ctxT(t)
	dlgrpctest.HeapRun(t, func(i int) error {
		k := i % len(cases)
		next.Store(int32(k))
		_, err := c.Infer(ctx, &InferRequest{Model: "m"})
		if !errors.Is(err, cases[k].is) {
			return errors.Join(errors.New(cases[k].name), err)
		}
		return nil
	})
}

// hostileRESTServer serves answer to every request, on loopback, for the
// length of the test; it returns the base URL.
func hostileRESTServer(t *testing.T, answer func(w http.ResponseWriter)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		answer(w)
	})}
	go hs.Serve(lis)
	t.Cleanup(func() { hs.Close() })
	return "http://" + lis.Addr().String()
}
