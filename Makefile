# LocalStore — two commands: `make bench` and `make test`.
SHELL := /bin/bash
SWIFT ?= swift
APT_PACKAGES := libsqlite3-dev libsqlcipher-dev liblmdb-dev librocksdb-dev pkg-config
SUDO := $(shell [ "$$(id -u)" = "0" ] || echo sudo)
BENCH_ARGS ?=
# Each backend runs in this many child processes, in turns; per workload the median run is reported
# (docs/benchmarks.md, "One run, three processes per backend").
BENCH_PROCESSES ?= 3
# Reliability (docs/reliability.md): extra `swift build`/`swift test` flags (e.g. --scratch-path .build-rel),
# the stress sizes, and the fuzzer's arguments (localstore-fuzz --queries N --records N --odata N --seed S).
RELIABILITY_FLAGS ?=
STRESS_KILLS ?= 500
# SIGKILLs per persistent backend of a client syncing against a file-backed service, in its process and over
# HTTP in each protocol (docs/reliability.md, "Sync under SIGKILL").
STRESS_SYNC_KILLS ?= 300
# Power-loss crash states per profile (two profiles per persistent backend, docs/reliability.md).
STRESS_POWERLOSS_STATES ?= 600
STRESS_REPORT ?= $(CURDIR)/.build-reliability/stress-report.txt
FUZZ_ARGS ?=
# `make docs`: the DocC archives of the library products, one <Target>.doccarchive each, in DOCS_DIR.
DOCS_DIR ?= $(CURDIR)/.build-docs
DOCS_TARGETS := LocalStore LocalStoreKV LocalStoreSQLite LocalStoreSQLCipher LocalStoreLMDB LocalStoreConformance LocalStoreOpener LocalStoreSync LocalStoreSyncHTTP

.PHONY: deps test bench build clean stress fuzz docs sanitize

# Installs the C libraries the backends (and the RocksDB example, Examples/RocksDBStore) need, only when
# pkg-config cannot find them.
deps:
	@if command -v pkg-config >/dev/null 2>&1 && pkg-config --exists sqlite3 sqlcipher lmdb rocksdb; then \
		echo "deps: sqlite3 $$(pkg-config --modversion sqlite3), sqlcipher $$(pkg-config --modversion sqlcipher), lmdb $$(pkg-config --modversion lmdb), rocksdb $$(pkg-config --modversion rocksdb)"; \
	else \
		echo "deps: installing $(APT_PACKAGES)"; \
		$(SUDO) apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $(APT_PACKAGES); \
	fi

# The whole test suite (conformance suite on every backend, backend-specific tests, core tests).
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

# The benchmark of every backend, release build, temporary stores; ends with the backend × workload
# summary. The chart: make bench BENCH_ARGS="--chart docs/benchmarks.svg" (docs/benchmarks.md, "Reproduce").
bench: deps
	$(SWIFT) build -c release --product localstore
	$$($(SWIFT) build -c release --show-bin-path)/localstore bench --processes $(BENCH_PROCESSES) $(BENCH_ARGS)

# The long reliability run: 500 SIGKILLs per persistent backend (a fresh store every 100), 300 SIGKILLs of a
# syncing client per persistent backend (+ 300 per backend and protocol over HTTP), every write/sync/truncate call of the fault workload failed once
# with EIO and once with ENOSPC, 60 + 60 damaged pages per backend, 8 threads x
# 5000 operations, 2 processes x 2000 transactions, every hostile-input case, 1,200 simulated power-loss
# crash states per persistent backend; prints the totals.
stress: deps
	$(SWIFT) build --build-tests $(RELIABILITY_FLAGS)
	@mkdir -p $(dir $(STRESS_REPORT)) && rm -f $(STRESS_REPORT)
	LOCALSTORE_CRASH_KILLS=$(STRESS_KILLS) LOCALSTORE_SYNC_CRASH_KILLS=$(STRESS_SYNC_KILLS) LOCALSTORE_DAMAGED_PAGES=60 LOCALSTORE_FAULT_POINTS=0 LOCALSTORE_CRASH_ROTATE=100 LOCALSTORE_THREAD_OPS=5000 \
	LOCALSTORE_PROCESS_TXNS=2000 LOCALSTORE_FUZZ_QUERIES=20000 LOCALSTORE_RELIABILITY_REPORT=$(STRESS_REPORT) \
	LOCALSTORE_POWERLOSS_STATES=$(STRESS_POWERLOSS_STATES) LOCALSTORE_POWERLOSS_TXNS=200,60 \
		$(SWIFT) test --skip-build $(RELIABILITY_FLAGS) --filter LocalStoreReliabilityTests; \
	status=$$?; \
	echo; echo "== make stress: totals =="; sed 's/^RELIABILITY //' $(STRESS_REPORT) | grep -E '^(crash|sync-crash|damaged pages|io-faults|threads|multi-process|fuzz|power-loss)'; \
	awk '/^RELIABILITY power-loss [a-z]+-[a-z]+:/ { split($$3, p, "-"); b = p[1]; n[b] += $$4; \
		for (i = 5; i < NF; i++) { if ($$i == "committed") l[b] += $$(i + 1); if ($$i == "unopenable") u[b] += $$(i + 1) } } \
		END { for (b in n) printf "power-loss %s: %d crash states checked, lost committed transactions %d, unopenable %d\n", b, n[b], l[b], u[b] }' $(STRESS_REPORT); \
	awk '/^RELIABILITY crash [a-z]+:/ { k += $$4 } /^RELIABILITY crash while creating/ { c += $$6 } END { print "total SIGKILLs: " k + c " (" k " during writes, " c " while creating stores)" }' $(STRESS_REPORT); \
	exit $$status

# 1,000,000+ fuzz executions (release build): queries on every backend vs the reference evaluator,
# damaged LMDB records and catalogs, OData render/parse. Prints totals; fails on any disagreement.
fuzz: deps
	$(SWIFT) build -c release --product localstore-fuzz $(RELIABILITY_FLAGS)
	$$($(SWIFT) build -c release --show-bin-path $(RELIABILITY_FLAGS))/localstore-fuzz $(FUZZ_ARGS)

# The DocC catalogs of every library product (swift-docc-plugin), into DOCS_DIR (git-ignored). Fails on
# any warning: a broken or ambiguous symbol link, an undocumented parameter, a missing page.
docs: deps
	@rm -rf $(DOCS_DIR) && mkdir -p $(DOCS_DIR)
	@set -o pipefail; LOCALSTORE_DOCS=1 $(SWIFT) package --allow-writing-to-directory $(DOCS_DIR) generate-documentation \
		$(addprefix --target ,$(DOCS_TARGETS)) --output-path $(DOCS_DIR) --warnings-as-errors $(DOCS_FLAGS) \
		2>&1 | tee $(DOCS_DIR)/generate-documentation.log
	@# SwiftPM's note on a dependency's unhandled files (swift-distributed-tracing, under AsyncHTTPClient) is not ours.
	@if grep -n 'warning:' $(DOCS_DIR)/generate-documentation.log | grep -v "file(s) which are unhandled"; then echo "docs: warnings (above)"; exit 1; fi
	@echo "docs: $(words $(DOCS_TARGETS)) archives in $(DOCS_DIR), no warnings"

# The whole test suite under each sanitizer, each in its own scratch folder (.build-tsan, .build-asan), one
# batch per test target (Tests/Sanitizers/sanitize.sh). SQLCipher cases run in localstore-sqlcipher-suite, a process
# without libsqlite3 (docs/reliability.md, "Sanitizers"). UndefinedBehaviorSanitizer is not offered: swiftc
# refuses -sanitize=undefined on Linux. Any report, failed test or batch still running after
# SANITIZE_BATCH_TIMEOUT seconds fails the run; the totals are printed at the end. SANITIZE_FILTER is a
# regular expression matched after each target's name (`^<Target>\..*(<filter>)`): name suites or tests
# (`SANITIZE_FILTER="StoreTests|MonotonicRead"`), not test targets.
SANITIZERS ?= thread address
SANITIZE_FILTER ?=
SANITIZE_BATCH_TIMEOUT ?= 2700
sanitize: deps
	SWIFT='$(SWIFT)' SANITIZERS='$(SANITIZERS)' SANITIZE_FILTER='$(SANITIZE_FILTER)' \
		SANITIZE_BATCH_TIMEOUT='$(SANITIZE_BATCH_TIMEOUT)' bash Tests/Sanitizers/sanitize.sh

build: deps
	$(SWIFT) build

clean:
	rm -rf .build
