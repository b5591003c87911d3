// Package dlgrpctest checks that a tensor service's options stay in step
// with the options every service shares (dlgrpc.ServerOptions,
// dlgrpc.ClientOptions): the same names, the same types, and every one
// carried to the shared layer. dlflight's and dloip's tests use it, so
// that adding a shared option without carrying it fails their tests.
package dlgrpctest

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"github.com/godlpack/dlpack/dlgrpc"
)

// ServerOptionsInStep fails t unless convert, given a sample of every
// shared server option set, returns it unchanged: the service's
// Options took each (Fill) and its conversion gave each back.
func ServerOptionsInStep(t testing.TB, convert func(dlgrpc.ServerOptions) dlgrpc.ServerOptions) {
	t.Helper()
	sample := dlgrpc.ServerOptions{
		TLS:                &tls.Config{},
		Tokens:             map[string]string{"t": "p"},
		Authenticate:       func(context.Context, dlgrpc.AuthRequest) (string, error) { return "", nil },
		Allow:              func(string, dlgrpc.Op, string) bool { return true },
		Logger:             slog.New(slog.NewTextHandler(io.Discard, nil)),
		MaxMessageBytes:    1,
		MaxTensorBytes:     2,
		MaxConcurrentCalls: 3,
		StallTimeout:       time.Second,
		HandshakeTimeout:   time.Minute,
		Transport:          dlgrpc.Transport{WindowBytes: 4},
		Allocator:          dlgrpc.DefaultAllocator,
	}
	same(t, sample, convert(sample))
}

// ClientOptionsInStep is ServerOptionsInStep for the client's options.
func ClientOptionsInStep(t testing.TB, convert func(dlgrpc.ClientOptions) dlgrpc.ClientOptions) {
	t.Helper()
	sample := dlgrpc.ClientOptions{
		TLS:             &tls.Config{},
		Token:           "t",
		Headers:         map[string]string{"h": "v"},
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)),
		MaxMessageBytes: 1,
		MaxTensorBytes:  2,
		Transport:       dlgrpc.Transport{WindowBytes: 4},
		Allocator:       dlgrpc.DefaultAllocator,
	}
	same(t, sample, convert(sample))
}

// Fill sets each field of the struct dst points to from the field of
// the same name of src, failing t when dst lacks one or has it under
// another type.
func Fill(t testing.TB, dst any, src any) {
	t.Helper()
	d := reflect.ValueOf(dst).Elem()
	s := reflect.ValueOf(src)
	for i := range s.NumField() {
		sf := s.Type().Field(i)
		f := d.FieldByName(sf.Name)
		if !f.IsValid() {
			t.Errorf("%v has no option %s (%v)", d.Type(), sf.Name, sf.Type)
			continue
		}
		if f.Type() != sf.Type {
			t.Errorf("%v.%s is a %v; the shared option is a %v", d.Type(), sf.Name, f.Type(), sf.Type)
			continue
		}
		f.Set(s.Field(i))
	}
}

// same fails t unless every field of got is that of want (functions
// compared by address), and want sets every field.
func same(t testing.TB, want, got any) {
	t.Helper()
	w, g := reflect.ValueOf(want), reflect.ValueOf(got)
	for i := range w.NumField() {
		name := w.Type().Field(i).Name
		if w.Field(i).IsZero() {
			t.Fatalf("dlgrpctest: the sample leaves %s zero", name)
		}
		wf, gf := w.Field(i), g.Field(i)
		eq := reflect.DeepEqual(wf.Interface(), gf.Interface())
		if wf.Kind() == reflect.Func {
			eq = wf.Pointer() == gf.Pointer()
		}
		if !eq {
			t.Errorf("option %s is not carried to the shared layer", name)
		}
	}
}
