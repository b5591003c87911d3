package dlflight

import (
	"testing"

	"github.com/godlpack/dlpack/dlgrpc"
	"github.com/godlpack/dlpack/dlgrpc/dlgrpctest"
)

// Options and ClientOptions carry every option the services share,
// under its shared name and type, to the shared layer.
func TestOptionsInStep(t *testing.T) {
	dlgrpctest.ServerOptionsInStep(t, func(s dlgrpc.ServerOptions) dlgrpc.ServerOptions {
		var o Options
		dlgrpctest.Fill(t, &o, s)
		return o.shared()
	})
	dlgrpctest.ClientOptionsInStep(t, func(s dlgrpc.ClientOptions) dlgrpc.ClientOptions {
		var o ClientOptions
		dlgrpctest.Fill(t, &o, s)
		return o.shared()
	})
}
