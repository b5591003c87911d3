package dloip

import (
	"bytes"
	"context"
	"testing"

	"github.com/godlpack/dlpack/dlgrpc"
	"github.com/godlpack/dlpack/dlgrpc/dlgrpctest"
)

// FuzzRESTRequest: any JSON header length and body a client sends as a
// REST inference request, with its length said or not (a chunked body),
// to the models of fuzzServer: the request is refused with an error, or
// every input holds exactly the bytes its shape needs; what it allocated
// comes back when it is released, nothing is held after a refusal, and
// the allocation is bounded by the body's own size.
func FuzzRESTRequest(f *testing.F) {
	f.Add("", []byte(`{"inputs":[{"name":"a","datatype":"FP32","shape":[2],"data":[1,2.5]},{"name":"b","datatype":"INT8","shape":[2,2],"data":[[1,-2],[3,4]]}]}`))
	f.Add("", []byte(`{"id":"x","parameters":{"p":1,"q":"s","r":true,"s":1.5},"inputs":[{"name":"x_BOOL","datatype":"BOOL","shape":[1,2],"data":[true,false]},{"name":"x_FP16","datatype":"FP16","shape":[1,2],"data":[NaN,-Infinity]}],"outputs":[{"name":"x_BOOL","parameters":{"binary_data":true}}]}`))
	f.Add("", []byte(`{"inputs":[{"name":"s","datatype":"BYTES","shape":[2],"data":["a\u00e9\ud83d\ude00","\n"]},{"name":"t","datatype":"UINT64","shape":[],"data":[18446744073709551615]}]}`))
	bin := []byte(`{"inputs":[{"name":"a","datatype":"FP32","shape":[2],"parameters":{"binary_data_size":8}},{"name":"b","datatype":"INT8","shape":[2,2],"parameters":{"binary_data_size":4}}]}`)
	f.Add("172", append(append([]byte{}, bin...), make([]byte, 12)...))
	bs := []byte(`{"inputs":[{"name":"s","datatype":"BYTES","shape":[2],"parameters":{"binary_data_size":9}}]}`)
	f.Add("92", append(append([]byte{}, bs...), 1, 0, 0, 0, 'a', 0, 0, 0, 0))
	f.Add("", []byte(`{"inputs":[{"name":"a","datatype":"FP32","shape":[268435456],"data":[1]}]}`))
	f.Add("1000", []byte(`{}`))
	f.Fuzz(func(t *testing.T, hdr string, body []byte) {
		for _, model := range []string{"m", "all", "echo"} {
			for _, length := range []int64{int64(len(body)), -1} {
				alloc := &countingAllocator{}
				var heap dlgrpctest.Heap
				a := heap.Allocated()
				m, err := fuzzServer.model(context.Background(), dlgrpc.OpInfer, model, "")
				if err != nil {
					t.Fatal(err)
				}
				lim := restLimits{maxBody: 1 << 20, maxTensor: fuzzServer.opts.MaxTensorBytes, alloc: alloc}
				in, err := readREST(bytes.NewReader(body), length, hdr, true, lim, func(msg *restMessage) error {
					_, _, err := fuzzServer.restCheck(m.meta, msg)
					return err
				})
				if err == nil {
					if ts, err := in.tensors(); err == nil {
						for _, x := range ts {
							if x.Datatype() == BYTES {
								if n, _ := elements(x.Shape()); int64(len(x.Elements())) != n {
									t.Fatalf("input %q holds %d elements for %v", x.Name(), len(x.Elements()), x.Shape())
								}
							} else if n, _ := byteSize(x.DataType(), x.Shape()); int64(len(x.Bytes())) != n {
								t.Fatalf("input %q holds %d bytes for %v %v", x.Name(), len(x.Bytes()), x.Datatype(), x.Shape())
							}
							x.Close()
						}
					}
				}
				if alloc.out.Load() != 0 {
					t.Fatalf("%d bytes held after release", alloc.out.Load())
				}
				if got := heap.Allocated() - a; got > uint64(64*len(body))+1<<20 {
					t.Fatalf("a body of %d bytes made the server allocate %d", len(body), got)
				}
			}
		}
	})
}
