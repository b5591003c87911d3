module example.com/downstream

go 1.25.0

require github.com/godlpack/dlpack v0.1.0

tool github.com/godlpack/dlpack/cmd/dlpack-header

// This checkout; a real project requires a released version instead.
replace github.com/godlpack/dlpack => ../../..
