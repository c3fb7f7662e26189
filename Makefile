# LocalStore — two commands: `make bench` and `make test`.
SHELL := /bin/bash
SWIFT ?= swift
APT_PACKAGES := libsqlite3-dev libsqlcipher-dev liblmdb-dev pkg-config
SUDO := $(shell [ "$$(id -u)" = "0" ] || echo sudo)
BENCH_ARGS ?=

.PHONY: deps test bench build clean

# Installs the C libraries the backends need, only when pkg-config cannot find them.
deps:
	@if command -v pkg-config >/dev/null 2>&1 && pkg-config --exists sqlite3 sqlcipher lmdb; then \
		echo "deps: sqlite3 $$(pkg-config --modversion sqlite3), sqlcipher $$(pkg-config --modversion sqlcipher), lmdb $$(pkg-config --modversion lmdb)"; \
	else \
		echo "deps: installing $(APT_PACKAGES)"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(APT_PACKAGES); \
	fi

# The whole test suite (conformance suite on every backend, backend-specific tests, core tests).
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

# The benchmark of every backend, release build, temporary stores.
bench: deps
	$(SWIFT) build -c release --product localstore
	$$($(SWIFT) build -c release --show-bin-path)/localstore bench $(BENCH_ARGS)

build: deps
	$(SWIFT) build

clean:
	rm -rf .build
