# The whole test suite: `make test` (what CI runs). Benchmarks: `make bench`.
# Every module of the repository is in go.work, and the package pattern
# "work" (PKGS) reaches the packages of all of them (./... would stop at
# the core module's edge; docs/modules.md); `make test-dlarrow` and the
# like test one bridge's module alone.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
GO ?= go
PKGS := work
STATICCHECK := v0.8.2

# The targets that run a chosen set of tests name each one, PKG:TEST, to
# internal/mustpass, which runs them (go test -json) and fails when one of
# them skipped or did not run at all, or anything it ran skipped: a
# missing peer, a renamed test or a build tag left out fails the target
# rather than printing ok. `-all` runs the packages' other tests too.
MUSTPASS := GO=$(GO) $(GO) run ./internal/mustpass

.PHONY: test modules fmt-check vet unit race cgocheck2 checkfinalizers asan nocgo fuzz examples python python-lib python-loader python-example firsthour dlpark downstream bench compare onnx onnx-example images arrow files gomlx cli pybridges-lib flight flight-example compare-onnx oip compare-oip oip-example

test: modules fmt-check vet unit race cgocheck2 checkfinalizers asan nocgo fuzz examples python dlpark downstream firsthour onnx images arrow files gomlx cli flight oip gpu-check
	@echo "== all checks passed"

# The modules: each tidy, none drifting from VERSION and go.work, and
# what a user of each public package downloads (internal/modcheck).
modules:
	@echo "== modules: tidy, in step, and each public package's module graph"
	$(GO) run ./internal/modcheck tidy
	$(GO) run ./internal/modcheck graph

fmt-check:
	@echo "== gofmt"
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# staticcheck reads staticcheck.conf: its default checks, and ST1020-ST1022
# (every doc comment opens with its identifier).
vet:
	@echo "== go vet (cgo and CGO_ENABLED=0), staticcheck"
	$(GO) vet $(PKGS)
	CGO_ENABLED=0 $(GO) vet .
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK) $(PKGS)

unit:
	@echo "== go test"
	$(GO) test -count=1 $(PKGS)

race:
	@echo "== go test -race (also enables checkptr)"
	$(GO) test -count=1 -race $(PKGS)

cgocheck2:
	@echo "== go test, GOEXPERIMENT=cgocheck2"
	GOEXPERIMENT=cgocheck2 $(GO) test -count=1 $(PKGS)

checkfinalizers:
	@echo "== go test, GODEBUG=checkfinalizers=1 (cleanups must not reach their objects)"
	$(GO) test -count=1 -exec 'env GODEBUG=checkfinalizers=1' $(PKGS) 2>&1 | grep -v '^checkfinalizers: queue:'

asan:
	@echo "== go test -asan"
	$(GO) test -count=1 -asan $(PKGS)

nocgo:
	@echo "== CGO_ENABLED=0: build and the pure-Go tests"
	CGO_ENABLED=0 $(GO) build $(PKGS)
	CGO_ENABLED=0 $(GO) test -count=1 $(PKGS)

# Each fuzz target for a bounded number of executions (about 5 s here; the
# seed corpus in testdata/fuzz also runs in every plain `go test`).
# FUZZTIME=10m make fuzz for a campaign. Counts, not durations, by default:
# with Go before 1.27 a duration budget can end in a spurious "context
# deadline exceeded" failure (golang/go#75804).
FUZZTIME ?= 100000x
# A target is Name (in package .) or ./pkg:Name.
FUZZ_TARGETS := FuzzCheckTensor FuzzImport FuzzStridedView FuzzParseDataType FuzzParseDevice FuzzProduce \
	./tensorfile:FuzzNPYHeader ./tensorfile:FuzzSafetensorsHeader ./tensorfile:FuzzNPZ ./tensorfile:FuzzLZMA ./dlarrow:FuzzOpenFile \
	./dlgrpc:FuzzDecode ./dloip:FuzzInferRequest ./dloip:FuzzInferResponse ./dloip:FuzzStreamResponse ./dloip:FuzzRESTRequest \
	./dlflight:FuzzFlightData ./dlflight:FuzzTicket ./dlflight:FuzzFlightInfo ./dlflight:FuzzSchema
fuzz:
	@echo "== fuzzing, -fuzztime $(FUZZTIME) per target"
	@for t in $(FUZZ_TARGETS); do \
		pkg=.; case $$t in *:*) pkg=$${t%%:*}; t=$${t#*:};; esac; \
		echo "-- $$pkg $$t"; \
		$(MUSTPASS) -show '^fuzz:' "$$pkg:$$t" -- -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) || exit 1; \
	done

EXAMPLES := quickstart clib gonum arrow gomlx
examples:
	@echo "== examples run and end with nothing outstanding"
	@for e in $(EXAMPLES); do \
		echo "-- go run ./examples/$$e"; \
		out="$$($(GO) run ./examples/$$e)" || { echo "$$out"; exit 1; }; echo "$$out"; \
		grep -q '^done: outstanding exports 0$$' <<< "$$out" || { echo "$$e did not end with nothing outstanding"; exit 1; }; \
	done

# Go inside a Python process: the c-shared library, a virtualenv with the
# pinned peers (examples/python/requirements.txt), and the tests with them.
VENV := .venv
PYRUN := GODLPACK_LIB=$(CURDIR)/.build/libgodlpack.so PYTHONPATH=$(CURDIR)/examples/python $(VENV)/bin/python

VENV20 := .venv-numpy20
PYRUN20 := GODLPACK_LIB=$(CURDIR)/.build/libgodlpack.so PYTHONPATH=$(CURDIR)/examples/python $(VENV20)/bin/python

$(VENV20)/.installed: examples/python/requirements-numpy20.txt
	python3 -m venv $(VENV20)
	$(VENV20)/bin/python -m pip install -q --disable-pip-version-check -r examples/python/requirements-numpy20.txt
	touch $@

$(VENV)/.installed: examples/python/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/python -m pip install -q --disable-pip-version-check -r examples/python/requirements.txt
	touch $@

python-lib:
	$(GO) build -buildmode=c-shared -o .build/libgodlpack.so ./examples/python/libgodlpack

python: python-lib python-loader $(VENV)/.installed $(VENV20)/.installed
	@echo "== Python interop (NumPy, JAX, pyarrow, pydlpack, through the c-shared library)"
	GODLPACK_MATRIX=$(CURDIR)/docs/interop-matrix.md $(PYRUN) -m pytest -q -p no:cacheprovider examples/python/tests
	@echo "== pycapsule from Go, in an embedded CPython with NumPy: plain, -race, cgocheck2, asan"
	GODLPACK_PYTHON=$(CURDIR)/$(VENV)/bin/python $(GO) test -count=1 ./pycapsule/...
	GODLPACK_PYTHON=$(CURDIR)/$(VENV)/bin/python $(GO) test -count=1 -race ./pycapsule/...
	GODLPACK_PYTHON=$(CURDIR)/$(VENV)/bin/python GOEXPERIMENT=cgocheck2 $(GO) test -count=1 ./pycapsule/...
	GODLPACK_PYTHON=$(CURDIR)/$(VENV)/bin/python $(GO) test -count=1 -asan ./pycapsule/...
	@echo "== Python interop with the oldest NumPy 2.x"
	GODLPACK_MATRIX=$(CURDIR)/docs/interop-matrix-numpy20.md $(PYRUN20) -m pytest -q -p no:cacheprovider examples/python/tests_numpy20
	@out="$$($(PYRUN) examples/python/demo.py)"; echo "$$out"; \
		grep -q '^done: outstanding exports 0$$' <<< "$$out" || { echo "the Python example did not end with nothing outstanding"; exit 1; }

# cmd/dlpack-python as a user runs it: docs/python.md's round trip in an
# empty module outside the repository (the README's lines), go generate,
# a c-shared library, and NumPy through the generated loader, both ways;
# a library loaded with ctypes.CDLL refused (a SystemError whose cause is
# pycapsule's RuntimeError).
python-loader: $(VENV)/.installed
	@echo "== cmd/dlpack-python: a fresh module's library and its generated Python loader"
	GODLPACK_PYTHON=$(CURDIR)/$(VENV)/bin/python $(MUSTPASS) -all -show 'round trip|ctypes.CDLL' ./cmd/dlpack-python:TestFreshModuleRoundTrip -- -count=1

python-example: python-lib $(VENV)/.installed
	$(PYRUN) examples/python/demo.py

# ONNX Runtime (package dlonnx, examples/onnx): the onnxruntime wheel pinned
# in examples/python/requirements.txt ships libonnxruntime.so, which the Go
# tests load ($$ONNXRUNTIME_LIB, found when the recipe runs, after the venv);
# the onnx package writes the test models ($$DLONNX_MODELS). Plain go test
# skips what needs them; with DLONNX_MODELS set they must run.
ORT_LIB := $(VENV)/bin/python -c 'import glob, os, onnxruntime; print(sorted(glob.glob(os.path.join(os.path.dirname(onnxruntime.__file__), "capi", "libonnxruntime.so.*")))[0])'
ONNX_ENV = ONNXRUNTIME_LIB=$(shell $(ORT_LIB)) DLONNX_MODELS=$(CURDIR)/.build/onnx
# Go inside Python: the bridges' library (pybridges-lib, below).
ONNXRUN = PYBRIDGES_LIB=$(PYBRIDGES_LIB) PYTHONPATH=$(CURDIR)/examples/onnx $(VENV)/bin/python

onnx: pybridges-lib $(VENV)/.installed
	@echo "== ONNX Runtime bridge (dlonnx) on the onnxruntime wheel's library: plain, race, cgocheck2, checkfinalizers, asan"
	$(ORT_LIB)
	$(VENV)/bin/python dlonnx/testdata/models.py .build/onnx
	$(ONNX_ENV) $(MUSTPASS) -all ./dlonnx:TestMLPFloat32 ./dlonnx:TestSideBySidePython -- -count=1 -skip '^TestSoak$$'
	$(ONNX_ENV) $(GO) test -count=1 -race ./dlonnx
	$(ONNX_ENV) GOEXPERIMENT=cgocheck2 $(GO) test -count=1 ./dlonnx
	$(ONNX_ENV) $(GO) test -count=1 -exec 'env GODEBUG=checkfinalizers=1' ./dlonnx 2>&1 | grep -v '^checkfinalizers: queue:'
	$(ONNX_ENV) $(GO) test -count=1 -asan ./dlonnx
	@echo "== dlonnx soak: 100,000 inferences with varying output shapes, flat memory"
	$(ONNX_ENV) DLONNX_SOAK=100000 $(MUSTPASS) -show '^\s+pool_test' ./dlonnx:TestSoak -- -count=1
	$(ONNX_ENV) $(GO) test -count=1 -run '^$$' -bench . -benchtime 2x ./dlonnx
	@echo "== ONNX Runtime and the Rust dlpark crate, both ways"
	cargo build --release --quiet --manifest-path internal/dlparkpeer/rust/Cargo.toml
	$(ONNX_ENV) $(MUSTPASS) ./dlonnx:TestRustBothWays -- -count=1 -tags dlpark
	@echo "== ONNX Runtime from Go inside Python, side by side with onnxruntime's Python API"
	$(ONNXRUN) -m pytest -q -p no:cacheprovider examples/onnx/tests
	@out="$$($(ONNXRUN) examples/onnx/demo.py)"; echo "$$out"; \
		grep -q '^done: outstanding exports 0$$' <<< "$$out" || { echo "the ONNX example did not end with nothing outstanding"; exit 1; }

onnx-example: pybridges-lib $(VENV)/.installed
	$(ONNXRUN) examples/onnx/demo.py

# The bridges inside Python: one c-shared library (internal/libpybridges)
# that the Python tests of every bridge load from $PYBRIDGES_LIB.
PYBRIDGES_LIB := $(CURDIR)/.build/libpybridges.so
pybridges-lib:
	$(GO) build -buildmode=c-shared -o $(PYBRIDGES_LIB) ./internal/libpybridges

# Images: PNG files decoded by Go's image/png and handed to NumPy through
# DLPack (package dlimage) against Pillow's decoding of the same files, and
# NumPy arrays encoded by Go against Pillow; then the PNG example.
IMGRUN := PYBRIDGES_LIB=$(PYBRIDGES_LIB) PYTHONPATH=$(CURDIR)/examples/png $(VENV)/bin/python
images: pybridges-lib $(VENV)/.installed
	@echo "== images: image/png and Pillow through DLPack (examples/png)"
	$(IMGRUN) -m pytest -q -p no:cacheprovider examples/png/tests
	@out="$$($(IMGRUN) examples/png/demo.py)"; echo "$$out"; \
		grep -q '^done: outstanding exports 0$$' <<< "$$out" || { echo "the PNG example did not end with nothing outstanding"; exit 1; }
# dlarrow side by side with pyarrow: the bridges' library, the protocol,
# import and mapped-file tests, the 100,000-round soaks, and the generated
# comparison docs/arrow-matrix.md; then the IPC file flip sweep with
# pyarrow's file reader as the judge (DLARROW_PYTHON).
arrow: pybridges-lib $(VENV)/.installed
	@echo "== dlarrow with pyarrow, NumPy and JAX (through the bridges' library)"
	PYBRIDGES_LIB=$(PYBRIDGES_LIB) DLARROW_MATRIX=$(CURDIR)/docs/arrow-matrix.md \
		$(VENV)/bin/python -m pytest -q -p no:cacheprovider dlarrow/python
	DLARROW_PYTHON=$(CURDIR)/$(VENV)/bin/python $(MUSTPASS) -show flips \
		$(addprefix ./dlarrow:,TestOpenFileFlipSweep TestOpenFilePyarrowFiles TestOpenFilePyarrowCompressed) -- -count=1

# The Rust dlpark crate as a peer: a C-ABI static library built by cargo
# (crates.io), linked into the Go tests of internal/dlparkpeer (tag dlpark).
dlpark:
	@echo "== Rust dlpark peer"
	cargo build --release --quiet --manifest-path internal/dlparkpeer/rust/Cargo.toml
	$(GO) vet -tags dlpark ./internal/dlparkpeer
	$(MUSTPASS) -show 'round trips' $(addprefix ./internal/dlparkpeer:,TestImportFromDlpark TestExportToDlpark TestSoak TestEveryDataTypeBothWays) -- -count=1 -tags dlpark
	$(MUSTPASS) $(addprefix ./internal/dlparkpeer:,TestImportFromDlpark TestExportToDlpark) -- -count=1 -tags dlpark -race

# Two separate modules that use the library as other projects would
# (examples/downstream): core, with its own cgo producers and consumers,
# and flight, a dlflight round trip; each built and tested from a copy
# outside the repository, normally and vendored (then also -race,
# cgocheck2; core also -asan), its module graph checked first.
downstream:
	@echo "== downstream modules (examples/downstream/core, flight): normal and vendored"
	GO=$(GO) bash examples/downstream/check.sh core
	GO=$(GO) bash examples/downstream/check.sh flight

# The first hour of a new user (examples/firsthour): an empty module
# outside the repository given its requirements by the README's
# "Depending on it" lines, then three programs: a safetensors file to C,
# a Flight tensor to pyarrow.flight, an image and a gonum matrix to NumPy
# through the generated Python loader.
firsthour: $(VENV)/.installed
	@echo "== the first hour: an empty module, the README's lines, then three programs"
	PY=$(CURDIR)/$(VENV)/bin/python GO=$(GO) bash examples/firsthour/check.sh

# Tensor files (package tensorfile) against the real NumPy and safetensors
# of the pinned venv: files each writes read bit for bit by the other,
# NumPy sharing a Go mapping through DLPack, and the safetensors example.
files: pybridges-lib $(VENV)/.installed
	@echo "== tensor files: NumPy and safetensors peers, examples/safetensors"
	TENSORFILE_PYTHON=$(CURDIR)/$(VENV)/bin/python PYBRIDGES_LIB=$(PYBRIDGES_LIB) $(MUSTPASS) -show 'bit for bit|Go mapping' \
		$(addprefix ./tensorfile:,TestPeersCreate TestNPZPeersNumPyAgrees TestPeersWriteGoReads TestPeersGoWritesPythonReads TestNumPySharesTheMapping) -- -count=1
	@out="$$(TENSORFILE_PYTHON=$(CURDIR)/$(VENV)/bin/python $(GO) run ./examples/safetensors)" || { echo "$$out"; exit 1; }; echo "$$out"; \
		grep -q '^done: outstanding exports 0$$' <<< "$$out" || { echo "examples/safetensors did not end with nothing outstanding"; exit 1; }

# GoMLX (package dlgomlx): weights written by Python's safetensors, taken
# into GoMLX by the bridge, a softmax MLP run on simplego, its results
# taken by NumPy through DLPack and compared with JAX (Go inside Python,
# the bridges' library internal/libpybridges); the 100,000-exchange soaks
# each way, in Go and with NumPy; then the side by side again under
# cgocheck2, the test building the library with it. Plain go test skips
# the Python part (DLGOMLX_PYTHON unset).
gomlx: pybridges-lib $(VENV)/.installed
	@echo "== GoMLX bridge (dlgomlx): safetensors -> GoMLX (simplego) -> NumPy, against JAX; 100,000 exchanges each way"
	DLGOMLX_PYTHON=$(CURDIR)/$(VENV)/bin/python PYBRIDGES_LIB=$(PYBRIDGES_LIB) DLGOMLX_SOAK=100000 $(MUSTPASS) -show 'copies|exchanges|bit for bit|done' \
		./dlgomlx:TestNumPyAndJAXSideBySide ./dlgomlx:TestSoak -- -count=1
	@echo "== the same side by side, GOEXPERIMENT=cgocheck2 (library and test; the race detector cannot load into Python)"
	DLGOMLX_PYTHON=$(CURDIR)/$(VENV)/bin/python GOEXPERIMENT=cgocheck2 $(MUSTPASS) ./dlgomlx:TestNumPyAndJAXSideBySide -- -count=1

# The tensorfile command (cmd/tensorfile) on files written by NumPy,
# safetensors and pyarrow, every conversion read back by them bit for bit;
# plain go test skips the peer tests, which run when TENSORFILE_PYTHON is set.
cli: $(VENV)/.installed
	@echo "== cmd/tensorfile: inspect and convert against NumPy, safetensors and pyarrow"
	TENSORFILE_PYTHON=$(CURDIR)/$(VENV)/bin/python $(MUSTPASS) -all -show 'bit for bit|as they read them|^ +(arrow|npy|npz|safetensors):|flips' \
		$(addprefix ./cmd/tensorfile:,TestPeersInspect TestPeersConvert TestConformanceCorpus TestConformanceFlips) -- -count=1
	TENSORFILE_PYTHON=$(CURDIR)/$(VENV)/bin/python $(GO) test -count=1 -race ./cmd/tensorfile

# The conformance corpus of cmd/tensorfile with its flipped-byte sweeps over
# every bit of every byte of each format's sample file (make cli flips
# 250 bytes of each).
.PHONY: conformance-campaign
conformance-campaign: $(VENV)/.installed
	@echo "== conformance corpus, flipping every bit of each format's sample file"
	CONFORMANCE_FLIPS=bits TENSORFILE_PYTHON=$(CURDIR)/$(VENV)/bin/python $(MUSTPASS) -show 'as they read them|^ +(arrow|npy|npz|safetensors):|flips' \
		./cmd/tensorfile:TestConformanceCorpus ./cmd/tensorfile:TestConformanceFlips -- -count=1 -timeout 30m

# Arrow Flight (package dlflight) against pyarrow.flight of the pinned venv:
# a pyarrow client of the Go server and a pyarrow server of the Go client,
# over TLS with bearer tokens, every element type bit for bit; plain,
# -race and cgocheck2 (the whole package: refusals, lying batches, hang-ups,
# the loopback load test); then examples/flight, a Go server and a Python
# client.
FLIGHT_ENV := DLFLIGHT_PYTHON=$(CURDIR)/$(VENV)/bin/python
flight: $(VENV)/.installed
	@echo "== Arrow Flight: dlflight with pyarrow.flight (TLS, tokens), plain, race, cgocheck2"
	$(FLIGHT_ENV) $(MUSTPASS) -show 'bit for bit' ./dlflight:TestPeersPyarrowClient ./dlflight:TestPeersPyarrowServer -- -count=1
	$(FLIGHT_ENV) $(GO) test -count=1 ./dlflight
	$(FLIGHT_ENV) $(GO) test -count=1 -race ./dlflight
	$(FLIGHT_ENV) GOEXPERIMENT=cgocheck2 $(GO) test -count=1 ./dlflight
	@$(MAKE) --no-print-directory flight-example

# examples/flight alone, without the dlflight suite.
flight-example: $(VENV)/.installed
	@out="$$($(FLIGHT_ENV) $(GO) run ./examples/flight)" || { echo "$$out"; exit 1; }; echo "$$out"; \
		grep -q '^done: outstanding exports 0$$' <<< "$$out" || { echo "examples/flight did not end with nothing outstanding"; exit 1; }

# The Open Inference Protocol (module dloip, KServe v2 / Triton over gRPC):
# oip.proto checked field by field against kserve's and tritonclient's own
# definitions, the generated Go code regenerated and compared with the
# committed one, then the package's tests with the real peers (plain go
# test skips them: DLOIP_PYTHON unset; here a skip fails; vet, -race,
# cgocheck2 and checkfinalizers run with every module's, above); then
# dloip/oiponnx with ONNX Runtime, plain, -race and cgocheck2, and its
# example.
VENV_OIP := .venv-oip
VENV_PROTOC := .venv-protoc
VENV_MLSERVER := .venv-mlserver
$(VENV_MLSERVER)/.installed: dloip/testdata/requirements-mlserver.txt
	python3 -m venv $(VENV_MLSERVER)
	$(VENV_MLSERVER)/bin/python -m pip install -q --disable-pip-version-check -r dloip/testdata/requirements-mlserver.txt
	touch $@
$(VENV_OIP)/.installed: dloip/testdata/requirements.txt
	python3 -m venv $(VENV_OIP)
	$(VENV_OIP)/bin/python -m pip install -q --disable-pip-version-check -r dloip/testdata/requirements.txt
	touch $@
$(VENV_PROTOC)/.installed: dloip/internal/pb/requirements-protoc.txt
	python3 -m venv $(VENV_PROTOC)
	$(VENV_PROTOC)/bin/python -m pip install -q --disable-pip-version-check -r dloip/internal/pb/requirements-protoc.txt
	touch $@
oip: $(VENV_OIP)/.installed $(VENV_PROTOC)/.installed $(VENV_MLSERVER)/.installed $(VENV)/.installed
	@echo "== dloip: oip.proto against kserve's and tritonclient's definitions; the generated code is current"
	$(VENV_OIP)/bin/python dloip/testdata/check_proto.py dloip/internal/pb/oip.proto kserve
	$(VENV_OIP)/bin/python dloip/testdata/check_proto.py dloip/internal/pb/oip.proto triton
	rm -rf .build/oip-gen && mkdir -p .build/oip-gen
	PROTOC_PYTHON=$(CURDIR)/$(VENV_PROTOC)/bin/python OUT=$(CURDIR)/.build/oip-gen PLUGIN_BIN=$(CURDIR)/.build/bin dloip/internal/pb/generate.sh
	diff -u dloip/internal/pb/oip.pb.go .build/oip-gen/oip.pb.go
	diff -u dloip/internal/pb/oip_grpc.pb.go .build/oip-gen/oip_grpc.pb.go
	@echo "== dloip with the peers: kserve's ModelServer and MLServer <- our client; kserve's and tritonclient's gRPC clients -> our server (TLS, token); tritonclient's shared memory; streaming: tritonclient's stream -> our server, our client -> a Python grpcio stream server; over REST: curl, kserve's and tritonclient's REST clients -> our server (TLS, token), our REST client -> kserve's and MLServer's"
	DLOIP_LARGE=1 DLOIP_PYTHON=$(CURDIR)/$(VENV_OIP)/bin/python DLOIP_MLSERVER=$(CURDIR)/$(VENV_MLSERVER)/bin/python $(MUSTPASS) -all -show 'bit for bit|load:|1 GiB|stream' \
		$(addprefix ./dloip:,TestPeersKserveServer TestPeersClients TestPeersTritonSharedMemory TestPeersTritonRegionsGoClient TestPeersMLServer TestLarge TestPeersTritonStream TestPeersPythonStreamServer \
		TestPeersRESTCurl TestPeersRESTClients TestPeersRESTKserveServer TestPeersRESTMLServer TestPeersREADME) -- -count=1
	@echo "== dloip/oiponnx: dlonnx sessions served over the protocol, bit for bit with ONNX Runtime's Python API; the example"
	$(VENV)/bin/python dlonnx/testdata/models.py .build/onnx
	$(ONNX_ENV) $(MUSTPASS) -all -show 'bit for bit' ./dloip/oiponnx:TestSideBySidePython -- -count=1
	$(ONNX_ENV) $(GO) test -count=1 -race ./dloip/oiponnx/...
	$(ONNX_ENV) GOEXPERIMENT=cgocheck2 $(GO) test -count=1 ./dloip/oiponnx/...
	@$(MAKE) --no-print-directory oip-example

# The dloip example: a Go service serving an ONNX model over the Open Inference
# Protocol (dloip/oiponnx/example), called by the Python kserve client.
oip-example: $(VENV_OIP)/.installed $(VENV)/.installed
	$(VENV)/bin/python dlonnx/testdata/models.py .build/onnx
	@out="$$($(ONNX_ENV) DLOIP_PYTHON=$(CURDIR)/$(VENV_OIP)/bin/python $(GO) run ./dloip/oiponnx/example $(CURDIR)/.build/onnx/batch_float32.onnx)" || { echo "$$out"; exit 1; }; \
		grep -vE '^[xy]: ' <<< "$$out"; \
		grep -q '^done: outstanding exports 0$$' <<< "$$out" || { echo "the oip example did not end with nothing outstanding"; exit 1; }

# Benchmarks, benchstat-friendly: `make bench > new.txt`, then
# `benchstat old.txt new.txt`. BENCH and COUNT narrow or widen the run.
BENCH ?= .
COUNT ?= 6
bench:
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count $(COUNT) .

# Side-by-side comparison with the C floor, NumPy and Rust dlpark (installs
# NumPy in .venv-bench and builds the dlpark crate); prints a Markdown table.
compare:
	bash bench/compare.sh

# dlonnx beside ONNX Runtime's Python API (sess.run, IOBinding), fresh
# output shapes at 4 KiB and 64 MiB (bench/onnx_compare.sh).
compare: compare-onnx
compare-onnx: $(VENV)/.installed
	PY=$(VENV)/bin/python bash bench/onnx_compare.sh

# dloip beside kserve's ModelServer and the Python clients (kserve,
# tritonclient): one FP32 tensor there and back at 4 KiB, 1 MiB, 64 MiB,
# medians, with memcpy and Go over shared memory; and streaming, 1,000
# responses of 16 bytes to one request, per response, our client and
# tritonclient against our server and a Python grpcio one, taking turns;
# Markdown tables.
compare: compare-oip
compare-oip: $(VENV_OIP)/.installed
	$(GO) run ./bench/oipcompare -python $(CURDIR)/$(VENV_OIP)/bin/python -scripts dloip/testdata

# The GPU suite (examples/python/tests_gpu): CUDA tensors of PyTorch, CuPy
# and JAX through Go, run on a machine with an NVIDIA GPU (never by `make
# test`: CI has none). gpu-build stages here everything the run needs into
# .build/gpu; the GPU machine then runs `bash .build/gpu/run.sh` in a copy
# of the repository with .build/gpu carried along, and writes
# interop-matrix-gpu.md into $OUT (see docs/gpu.md). gpu-check runs the staged suite here: without CUDA the CUDA
# cases collect and skip, and the checks of the helpers run on the CPU.
.PHONY: gpu-build gpu-check
GPU_STAGE := .build/gpu
gpu-build:
	rm -rf $(GPU_STAGE)
	mkdir -p $(GPU_STAGE)/python $(GPU_STAGE)/tests_gpu
	$(GO) build -buildmode=c-shared -o $(GPU_STAGE)/libgodlpack.so ./examples/python/libgodlpack
	rm -f $(GPU_STAGE)/libgodlpack.h
	cp examples/python/godlpack.py $(GPU_STAGE)/python/
	cp examples/python/tests_gpu/*.py $(GPU_STAGE)/tests_gpu/
	cp gpu/run.sh $(GPU_STAGE)/run.sh
	{ git rev-parse --short=12 HEAD 2>/dev/null || echo unknown; } | tr -d '\n' > $(GPU_STAGE)/COMMIT
	@if [ -n "$$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then echo -n "+changes" >> $(GPU_STAGE)/COMMIT; fi
	@echo "== staged $(GPU_STAGE) ($$(du -sh $(GPU_STAGE) | cut -f1)); on the GPU machine: bash .build/gpu/run.sh, carry [\".build/gpu\"]"

gpu-check: gpu-build $(VENV)/.installed
	@echo "== GPU suite without a GPU: the CUDA cases skip, the helpers are checked on the CPU"
	cd $(GPU_STAGE) && GODLPACK_LIB=$(CURDIR)/$(GPU_STAGE)/libgodlpack.so PYTHONPATH=python:tests_gpu \
		$(CURDIR)/$(VENV)/bin/python -m pytest -q -rs -p no:cacheprovider tests_gpu

# One bridge's module alone, for a contributor who touches only it: gofmt,
# vet and staticcheck, its tests in every mode, and its peers.
.PHONY: test-dlarrow test-dlflight test-dlgomlx test-dlgonum test-dlonnx test-dlgrpc test-dloip test-cmd-tensorfile
MODE_CHECKS := fmt-check vet unit race cgocheck2 checkfinalizers asan nocgo
test-dlarrow: PKGS := ./dlarrow/...
test-dlarrow: modules $(MODE_CHECKS) arrow
test-dlflight: PKGS := ./dlflight/...
test-dlflight: modules $(MODE_CHECKS) flight
test-dlgomlx: PKGS := ./dlgomlx/...
test-dlgomlx: modules $(MODE_CHECKS) gomlx
test-dlgonum: PKGS := ./dlgonum/...
test-dlgonum: modules $(MODE_CHECKS)
test-dlonnx: PKGS := ./dlonnx/...
test-dlonnx: modules $(MODE_CHECKS) onnx
test-dlgrpc: PKGS := ./dlgrpc/... ./dlflight/... ./dloip/...
test-dlgrpc: modules $(MODE_CHECKS) flight oip
test-dloip: PKGS := ./dloip/...
test-dloip: modules $(MODE_CHECKS) oip
test-cmd-tensorfile: PKGS := ./cmd/tensorfile/...
test-cmd-tensorfile: modules $(MODE_CHECKS) cli
test-dlarrow test-dlflight test-dlgomlx test-dlgonum test-dlonnx test-dlgrpc test-dloip test-cmd-tensorfile:
	@echo "== $@ passed"
