// Package oiponnx serves ONNX models over the Open Inference Protocol: a
// dlonnx.Session as a dloip.Model, its metadata taken from the session.
// It is a module of its own so that a user of the dloip client alone
// never gets onnxruntime_go in their module graph.
//
//   - Into a tensor: New (the request's inputs go to ONNX Runtime without
//     a copy).
//   - Out of a tensor: New (ONNX Runtime's outputs, adopted, are sent from
//     its own memory).
//   - Copies: a read-only input (one in shared memory) is copied once
//     into ONNX Runtime's tensor (dlonnx.CopyToValue), as is a rank-0 one.
package oiponnx

import (
	"context"
	"errors"
	"fmt"

	"github.com/godlpack/dlpack"
	"github.com/godlpack/dlpack/dloip"
	"github.com/godlpack/dlpack/dlonnx"
)

// Model is a dlonnx.Session served as a dloip.Model.
type Model struct {
	s    *dlonnx.Session
	meta dloip.ModelMetadata
}

// New serves s under name: its metadata lists the session's inputs and
// outputs in order, with their datatypes and shapes (-1 for dimensions
// the model leaves open). A model with an input or output of a type the
// protocol has no datatype for (the float8 types) fails with an error
// wrapping dloip.ErrDatatype. The session stays the caller's (Destroy it
// after the server has stopped).
func New(name string, s *dlonnx.Session) (*Model, error) {
	meta := dloip.ModelMetadata{Name: name, Versions: []string{"1"}, Platform: "onnxruntime_onnx"}
	for _, list := range []struct {
		what  string
		infos []dlonnx.Info
		into  *[]dloip.TensorMetadata
	}{{"input", s.Inputs(), &meta.Inputs}, {"output", s.Outputs(), &meta.Outputs}} {
		for _, in := range list.infos {
			d, err := dloip.DatatypeOf(in.DType)
			if err != nil {
				return nil, fmt.Errorf("oiponnx: %s %q: %w", list.what, in.Name, err)
			}
			*list.into = append(*list.into, dloip.TensorMetadata{Name: in.Name, Datatype: d, Shape: in.Shape})
		}
	}
	return &Model{s: s, meta: meta}, nil
}

// Metadata implements dloip.Model.
func (m *Model) Metadata() dloip.ModelMetadata { return m.meta }

// Infer implements dloip.Model: the inputs go to ONNX Runtime sharing
// the received memory (dlonnx.ToValue), read-only or rank-0 ones as a
// copy (dlonnx.CopyToValue); the outputs are ONNX Runtime's own
// (Session.Run), each released once the server has taken it.
func (m *Model) Infer(_ context.Context, req *dloip.Request) ([]dloip.Output, error) {
	ins := make([]*dlonnx.Tensor, 0, len(m.meta.Inputs))
	defer func() {
		for _, t := range ins {
			t.Destroy()
		}
	}()
	for _, meta := range m.meta.Inputs {
		in := req.Input(meta.Name)
		t, err := dlonnx.ToValue(in)
		if errors.Is(err, dlpack.ErrReadOnly) || errors.Is(err, dlpack.ErrLayout) || errors.Is(err, dlpack.ErrAlignment) || len(in.Shape()) == 0 {
			if t != nil {
				t.Destroy()
			}
			t, err = dlonnx.CopyToValue(in)
		}
		if err != nil {
			return nil, fmt.Errorf("oiponnx: input %q: %w", meta.Name, err)
		}
		ins = append(ins, t)
	}
	outs, err := m.s.Run(ins...)
	if err != nil {
		return nil, fmt.Errorf("oiponnx: run: %w", err)
	}
	res := make([]dloip.Output, len(outs))
	for i, o := range outs {
		res[i] = dloip.Output{Name: m.meta.Outputs[i].Name, Tensor: o, Release: func() { o.Destroy() }}
	}
	return res, nil
}
