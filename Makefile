# Tidelog: `make run` serves the console and broker, `make test` runs the whole suite.
# Both set up .venv (and, for tests, Debian's chromium, redis-server, kcat and postgresql) on a
# fresh machine.

SHELL := /bin/bash
.DEFAULT_GOAL := run

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-installed
BENCH_STAMP := $(VENV)/.bench-requirements-installed
NODE_TESTS := tests/protocol/node
NODE_STAMP := $(NODE_TESTS)/node_modules/.installed
export TIDELOG_HTTP_PORT ?= 8000
SYSTEM_PACKAGES := chromium fonts-dejavu-core redis-server kcat nodejs npm postgresql

# Compiled modules (Cython -> C -> a module beside its source), each with a pure-Python
# fallback that stays the reference; a test per module fails when it is not built, so CI
# cannot miss a build that failed:
#   streams/log/_cdecode       the record decoder (else aiokafka's reader; test_records_native.py)
#   streams/processing/_cwindow  tumbling windows' batch loop (else the pure loop; test_cwindow.py)
#   streams/jobs/_crecords     jobs' input record reading (else record by record; test_crecords.py)
#   streams/jobs/_cepchain     CEP chains of compiled conditions (else generated Python;
#                              test_cep_native.py)
#   streams/jobs/_cjoin        an inner interval join's batch and expiry loops (else joins.py's;
#                              test_joins_native.py)
#   streams/jobs/_ckafka       a Kafka fetch's messages into a job's buffers (else kafka.py's
#                              take_messages; test_ckafka.py)
#   streams/jobs/_cstate       a memory-backed store's changelog records at a commit (else
#                              state.py's _take_memory; test_cstate.py)
#   streams/schemas/_cavro     Avro values in the wire format, by a compiled schema program
#                              (else fastavro; test_cavro.py)
NATIVE := streams/log/_cdecode.so streams/processing/_cwindow.so streams/jobs/_crecords.so \
	streams/jobs/_cepchain.so streams/jobs/_cjoin.so streams/jobs/_ckafka.so \
	streams/jobs/_cstate.so streams/schemas/_cavro.so

.PHONY: run test soak bench lint venv system-deps node-deps native

venv: $(STAMP)

# Without a C compiler each module's fallback runs, and `make` says so.
native: $(NATIVE)

# every module rebuilt when the shared inline readers change (a .pxd is compiled into each user)
%.so: %.pyx streams/log/_cvarint.pxd streams/jobs/_cjsontext.pxd streams/jobs/_cjsoncanon.pxd \
		$(STAMP)
	@$(PY) -m cython -3 -o $*.c $< && \
	$${CC:-cc} -shared -fPIC -O2 -Wall \
		-I"$$($(PY) -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" \
		$*.c -o $@ || \
	echo "warning: could not build $@ (a C compiler and Python's headers are needed);" \
		"its pure-Python fallback runs instead" >&2

$(PY):
	$(PYTHON) -m venv $(VENV)

# Reinstall only when a requirements file is newer than the stamp.
$(STAMP): requirements.txt requirements-dev.txt | $(PY)
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $@

run: $(STAMP) native
	$(PY) manage.py migrate --noinput
	$(PY) manage.py ensure_admin
	$(PY) manage.py runserver --noreload --nostatic 127.0.0.1:$(TIDELOG_HTTP_PORT)

# Installs what is missing when we may (root); otherwise says what to install.
system-deps:
	@missing=""; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium fonts-dejavu-core"; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v kcat >/dev/null || missing="$$missing kcat"; \
	command -v node >/dev/null || missing="$$missing nodejs"; \
	command -v npm >/dev/null || missing="$$missing npm"; \
	ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing="$$missing postgresql"; \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then \
		echo "installing:$$missing"; \
		apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; \
	else \
		echo "warning: missing$$missing; install with: sudo apt-get install$$missing" >&2; \
	fi

# make test: the suite in TEST_WORKERS processes (pytest-xdist; a test file stays on one worker,
# so its module fixtures start once), its temporary files (pytest's tmp_path, the brokers' data
# dirs, PostgreSQL's) on TEST_TMPDIR: a RAM file system where there is one, since fsync there
# costs nothing (DEVELOPERS.md "Test time"). `make test TEST_TMPDIR=/tmp TEST_WORKERS=0` runs it
# on disk in one process; `make soak` always does.
TEST_WORKERS ?= 2
# (a /dev/shm with under 4 GiB free, e.g. a container's 64 MB, is not used)
SHM_FREE_KB := $(shell df -Pk /dev/shm 2>/dev/null | awk 'NR == 2 { print $$4 }')
SHM_OK := $(shell [ "$(SHM_FREE_KB)" -ge 4194304 ] 2>/dev/null && echo y)
TEST_TMPDIR ?= $(if $(SHM_OK),/dev/shm/tidelog-tests,$(or $(TMPDIR),/tmp))
test: $(STAMP) native system-deps node-deps
	mkdir -p $(TEST_TMPDIR)
	TMPDIR=$(TEST_TMPDIR) $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile

# make soak: the crash, torture, race and fuzz tests at long sizes (`make test` runs them at
# short ones; DEVELOPERS.md "Test sizes"). Each size is an environment variable that the
# command line or the environment overrides, e.g. `make soak TIDELOG_JOBS_KILLS=10`.
SOAK_TESTS := tests/txn/test_copier_crashes.py tests/txn/test_jepsen_run.py \
	tests/jobs/test_workers.py tests/log/test_crash_recovery.py tests/log/test_concurrency.py \
	tests/log/test_records_compiled.py tests/log/test_records_native.py \
	tests/protocol/test_robustness.py
soak: export TIDELOG_TXN_COPIER_RECORDS ?= 100000
soak: export TIDELOG_TXN_COPIER_CRASHES ?= 30
soak: export TIDELOG_TXN_JEPSEN_SECONDS ?= 300
soak: export TIDELOG_TXN_JEPSEN_CRASHES ?= 20
soak: export TIDELOG_JOBS_RECORDS ?= 200000
soak: export TIDELOG_JOBS_KILLS ?= 5
soak: export TIDELOG_TORTURE_ITERATIONS ?= 500
soak: export TIDELOG_CORRUPTION_CASES ?= 2000
soak: export TIDELOG_CONCURRENCY_SECONDS ?= 60
soak: export TIDELOG_RECORDS_EXAMPLES ?= 5000
soak: export TIDELOG_PROTOCOL_FUZZ_EXAMPLES ?= 10000
soak: $(STAMP) native system-deps node-deps
	$(PY) -m pytest -p no:cacheprovider -o timeout=0 $(SOAK_TESTS)

# The Node Kafka clients (KafkaJS, @platformatic/kafka) of tests/protocol, exactly as locked in
# package-lock.json; again only when the lock file changes. Skipped (the tests say why) without npm.
node-deps: system-deps
	@if command -v npm >/dev/null; then $(MAKE) --no-print-directory $(NODE_STAMP); \
	else echo "warning: npm is missing; the Node client tests will be skipped" >&2; fi

$(NODE_STAMP): $(NODE_TESTS)/package.json $(NODE_TESTS)/package-lock.json
	cd $(NODE_TESTS) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# make bench            all benchmarks in tests/bench/bench_*.py
# make bench BENCH=log  only tests/bench/bench_log.py
bench: $(BENCH_STAMP) native system-deps
	$(PY) -m tests.bench $(BENCH)

# Benchmark peers (requirements-bench.txt) on top of the dev requirements; Quix Streams (bench
# jobs) in a virtualenv of its own, since it pins an older confluent-kafka than Tidelog.
$(BENCH_STAMP): requirements-bench.txt requirements-bench-quix.txt $(STAMP)
	$(PY) -m pip install --quiet -r requirements-bench.txt
	$(PYTHON) -m venv .venv-quix
	.venv-quix/bin/pip install --quiet -r requirements-bench-quix.txt
	touch $@

# ruff's lint and format checks, and mypy over the Cluster seam (files in pyproject.toml)
lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy  # the Cluster Protocol and its implementations (pyproject.toml [tool.mypy])
