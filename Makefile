# The whole test suite: `make test` (what CI runs). Benchmarks: `make bench`.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
GO ?= go
PKGS := ./...
STATICCHECK := v0.8.2

.PHONY: test fmt-check vet unit race cgocheck2 checkfinalizers asan nocgo fuzz examples python python-lib python-example dlpark bench compare

test: fmt-check vet unit race cgocheck2 checkfinalizers asan nocgo fuzz examples python dlpark
	@echo "== all checks passed"

fmt-check:
	@echo "== gofmt"
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

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
FUZZ_TARGETS := FuzzCheckTensor FuzzImport FuzzStridedView FuzzParseDataType FuzzParseDevice FuzzProduce
fuzz:
	@echo "== fuzzing, -fuzztime $(FUZZTIME) per target"
	@for t in $(FUZZ_TARGETS); do \
		echo "-- $$t"; \
		$(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) . || exit 1; \
	done

EXAMPLES := quickstart clib gonum
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

python: python-lib $(VENV)/.installed $(VENV20)/.installed
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

python-example: python-lib $(VENV)/.installed
	$(PYRUN) examples/python/demo.py

# The Rust dlpark crate as a peer: a C-ABI static library built by cargo
# (crates.io), linked into the Go tests of internal/dlparkpeer (tag dlpark).
dlpark:
	@echo "== Rust dlpark peer"
	cargo build --release --quiet --manifest-path internal/dlparkpeer/rust/Cargo.toml
	$(GO) vet -tags dlpark ./internal/dlparkpeer
	$(GO) test -count=1 -tags dlpark -v -run . ./internal/dlparkpeer 2>&1 | grep -E '^(---|ok|FAIL|panic)|round trips'
	$(GO) test -count=1 -tags dlpark -race -run 'Import|Export' ./internal/dlparkpeer

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
