# bootlink: `make demo` and `make test` do all set-up on a fresh Debian 12 machine.

BIN := target/release/bootlink
CARGO ?= cargo

.PHONY: all deps build test demo bench clean

all: build

deps:
	@scripts/install-deps

build: deps
	$(CARGO) build --release

demo: build
	@scripts/demo

test: build
	@scripts/run-tests

bench: build
	bench/inspect
	bench/preresolve
	bench/chart

clean:
	$(CARGO) clean
	$(MAKE) -C tests/modules clean
