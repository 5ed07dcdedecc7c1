# bootlink: `make demo` and `make test` do all set-up on a fresh Debian 12 machine.

BIN := target/release/bootlink
CARGO ?= cargo

.PHONY: all deps build test test-offline test-extended demo demo-full demo-system bench clean

all: build

deps:
	@scripts/install-deps

build: deps
	$(CARGO) build --release

demo: build
	@scripts/demo

# The demo, with the patched kernel built first if it is not in the cache
# (about 25 minutes on 2 cores, once): every fix against stock.
demo-full: build
	@scripts/demo --build-kernel

# A Debian system (systemd, udev, initramfs-tools) booted with Debian's
# kernel, with bootlink's series and after `bootlink apply`: its boot
# stock against bootlink (the series' Debian-config build first, about an
# hour on 2 cores, once).
demo-system: build
	@scripts/demo-system

# The tests build the binary themselves: scripts/run-tests' one `cargo test
# --release --workspace --no-run` compiles target/release/bootlink (the same
# artifact `make build` makes) with the test binaries in one cargo graph,
# so the unit tests' second compile of each crate runs beside the chain
# bootlink -> bootlink-lab -> the binary instead of after it.
test: deps
	@scripts/run-tests

# Tier 1 only: offline, under a minute.
test-offline: deps
	@scripts/run-tests --tier 1

# The extended tier only (not part of `make test`): the kernel series'
# kernel/module/ compiled with -Werror in each combination of CONFIG_MODULE_SIG
# and CONFIG_MODULE_SYMHASH (tests/extended/kernel_configs.rs; see docs/kernel-series.md
# for its time).
test-extended: deps
	@scripts/run-tests --tier X

bench: build
	bench/inspect
	bench/preresolve
	bench/chart
	bench/preresolve-xz
	bench/kernel-build
	bench/symhash
	bench/finalize
	bench/batchloader
	bench/ddlink
	bench/ddlink-check
	bench/order
	bench/manifest
	bench/manifest-write
	bench/manifest-hash
	bench/links
	bench/links-distro
	bench/arm64
	bench/compress
	bench/compress-modules

clean:
	$(CARGO) clean
	$(MAKE) -C tests/modules clean
	$(MAKE) -C loader clean
