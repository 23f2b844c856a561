# The README's commands. Each target installs what it needs first.
BUILD      ?= build
ASAN_BUILD ?= build-asan
HOOKS_BUILD ?= build-hooks
PYTEST     ?= /usr/bin/python3 -m pytest
# Fuzzing: `make fuzz` runs every target this long (seconds); `make check`
# runs each for CHECK_FUZZ_SECONDS on the corpus in tests/fuzz/corpus/.
FUZZ_SECONDS ?= 300
# 10 s of each target keeps `make check` under its 30 minutes
# (it stood at ~31 with 20 s); each run replays its corpus first.
CHECK_FUZZ_SECONDS ?= 10
# ... two targets at a time (tests/fuzz/run-fuzz-net), one a core.
CHECK_FUZZ_PARALLEL ?= 2
# `make check` runs the integration suite in this many pytest-xdist workers:
# it mostly waits (sandbox setup, give-ups, servers), so 4 fit on 2 cores.
# Tests marked whole_host run while no other does (conftest.py).
CHECK_JOBS ?= 4

.PHONY: all deps build build-asan build-hooks browser-deps mcp-deps demo check escape sdk unit integration bench fuzz soak clean install schema

all: build

deps:
	./scripts/install-deps

$(BUILD)/build.ninja:
	meson setup $(BUILD)

$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

# docs/policy.schema.json is generated from the table of settings
# (src/lib/policy/settings.c); test_settings.py holds the file to it.
schema: build
	$(BUILD)/tests/brig-settings schema > docs/policy.schema.json

# brig, libexec/brig/brig-supervisor, libbrig, brig.h, brig.pc, the man
# pages and the bash and zsh completions under PREFIX (README: Install),
# staged below DESTDIR when it is set; on a host whose kernel runs AppArmor
# also /etc/apparmor.d/brig (docs/hosts.md: `meson configure $(BUILD)
# -Dapparmor=enabled|disabled` decides). A PREFIX other than the build's
# reconfigures it: the supervisor's fallback path is compiled in.
PREFIX  ?= /usr/local
DESTDIR ?=
install: build
	@if [ "$$(meson introspect $(BUILD) --buildoptions | python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')" != "$(abspath $(PREFIX))" ]; then \
		echo meson configure $(BUILD) --prefix=$(abspath $(PREFIX)); \
		meson configure $(BUILD) --prefix=$(abspath $(PREFIX)); \
	fi
	ninja -C $(BUILD)
	meson install -C $(BUILD) --no-rebuild $(if $(DESTDIR),--destdir $(abspath $(DESTDIR)))

build-asan: deps $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)

# Test-only hooks (see meson_options.txt); never installed.
$(HOOKS_BUILD)/build.ninja:
	meson setup $(HOOKS_BUILD) -Dtest_hooks=true

build-hooks: deps $(HOOKS_BUILD)/build.ninja
	ninja -C $(HOOKS_BUILD)

demo: build
	./demo/run-demo $(BUILD)/brig

# playwright-core for tests/integration/test_browser.py, exactly as
# tests/browser/package-lock.json pins it; it drives Debian's chromium and
# never downloads a browser of its own.
browser-deps: deps
	cd tests/browser && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --ignore-scripts --no-audit --no-fund

# The official MCP TypeScript SDK's client for tests/integration/test_mcp.py,
# exactly as tests/mcp/package-lock.json pins it.
mcp-deps: deps
	cd tests/mcp && npm ci --ignore-scripts --no-audit --no-fund

# The red-team catalogue (tests/escape/, docs/security.md): every attack
# really attempted inside brig with the default profile, as root and
# rootless; fails unless each is contained, and prints the per-attack
# table. `check` runs the same file with the rest of tests/integration.
escape: build
	BRIG_BUILD=$(BUILD) $(PYTEST) -q -rs tests/integration/test_escape.py

# Every test: unit and integration, on the normal build and under
# AddressSanitizer + UndefinedBehaviorSanitizer; as root and as an
# unprivileged user (the integration tests run both modes themselves).
# tests/integration includes test_escape.py: `make escape` runs in CI too,
# and test_sdk_python.py / test_sdk_typescript.py (`make sdk`).
# Then a representative sandbox under leak checkers (tests/leaks/run) and
# every fuzz target for a short, bounded time.
check: build build-asan build-hooks browser-deps mcp-deps
	meson test -C $(BUILD) --print-errorlogs
	meson test -C $(ASAN_BUILD) --print-errorlogs
	BRIG_BUILD=$(BUILD) $(PYTEST) -q -rs -n $(CHECK_JOBS) --dist loadgroup tests/integration
	BRIG_BUILD=$(ASAN_BUILD) $(PYTEST) -q -rs -n $(CHECK_JOBS) --dist loadgroup tests/integration
	tests/leaks/run $(BUILD) $(ASAN_BUILD)
	FUZZ_PARALLEL=$(CHECK_FUZZ_PARALLEL) $(MAKE) --no-print-directory fuzz FUZZ_SECONDS=$(CHECK_FUZZ_SECONDS)

# The SDKs (sdk/python, sdk/typescript) against a live brig serve they
# start themselves, as root and rootless: pytest for Python, `node --test`
# (run by test_sdk_typescript.py) for TypeScript. Neither SDK has a
# dependency to install: the TypeScript one is plain JavaScript with
# hand-written types and an empty package-lock.json.
sdk: build
	BRIG_BUILD=$(BUILD) $(PYTEST) -q -rs tests/integration/test_sdk_python.py tests/integration/test_sdk_typescript.py

# Every libFuzzer target (clang, ASan+UBSan) for FUZZ_SECONDS each, on a
# scratch copy of tests/fuzz/corpus/; crashing inputs land in build-fuzz/.
fuzz: deps
	tests/fuzz/run-fuzz $(FUZZ_SECONDS)
	tests/fuzz/run-fuzz-net $(FUZZ_SECONDS)

# Nothing left behind (issue 24; not part of check): SOAK_RUNS runs of a
# mix with SIGKILLs of brig, supervisor, pid 1 and pool daemon in a
# fraction, bounded by SOAK_SECONDS each, then a count of what is left on
# the host; as root and rootless, then with a full state root (ENOSPC) and
# refused cgroup writes. One line of figures each; fails if anything is left.
SOAK_RUNS ?= 1000
SOAK_SECONDS ?= 1800
SOAK = nice /usr/bin/python3 tests/soak/soak.py --brig $(BUILD)/brig --hooks-brig $(HOOKS_BUILD)/brig \
	--runs $(SOAK_RUNS) --seconds $(SOAK_SECONDS)
soak: build build-hooks
	$(SOAK)
	$(SOAK) --rootless
	$(SOAK) --enospc --cgroup-fail
	$(SOAK) --enospc --cgroup-fail --rootless

# The suite against itself (not part of check): each control of
# tests/mutation/*.patch disabled in turn in a scratch copy, rebuilt, and
# the tests that must notice run root and rootless; fails unless every
# mutation is killed. MUTATIONS=name selects some.
.PHONY: mutation
mutation: deps
	tests/mutation/run $(MUTATIONS)

# Installs the peers from Debian, runs every benchmark for brig and each
# peer in one run and writes docs/benchmarks.md (bench/run-all).
bench: build
	./scripts/install-bench-deps
	./bench/run-all $(BUILD)/brig

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(HOOKS_BUILD)
