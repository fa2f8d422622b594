# Two commands from a fresh clone: `make demo` and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
DEMO_DATA := data/netflix-1m.parquet

BENCH_ROWS := 1000000,10000000
ifeq ($(BENCH_FULL),1)
BENCH_ROWS := $(BENCH_ROWS),100480507
endif

PEER_ROWS ?= 10000000
PEER_REPEATS ?= 5
# PipelineDP takes minutes a run at 10M rows.
PDP_REPEATS ?= 1
PEER_DATA := data/netflix-$(PEER_ROWS).parquet
PDP_VENV := .venv-pipelinedp
TMLT_VENV := .venv-tumult

.PHONY: demo test test-fast lint package bench bench-peers reproduce-000 reproduce-001 reproduce-002 reproduce-003 reproduce-004 install check-java clean

demo: install check-java $(DEMO_DATA)
	$(BIN)/dp-spark run conf/demo.toml

# The suite in TEST_WORKERS processes (pytest-xdist), each with its own local SparkSession; a test
# file stays in one process (--dist loadfile), with its module-scoped fixtures, and files are handed
# out in collection order, the longest first (tests/conftest.py, LONG_FILES; xdist's own reorder by
# test count would leave the long files with few tests for last). Then the Spark Connect tests,
# which need a process without a classic session. (Run beside the others from the start, they made
# the whole 30:30 against 23 to 27 minutes one after the other: five JVMs on two cores.)
TEST_WORKERS ?= 2
# Bytecode caches on, whatever the environment says (PYTHONDONTWRITEBYTECODE is set on the
# machines this was measured on): the suite starts many Python processes (the workers, the Connect
# tier, jobs in child processes), and without the caches each one compiles dp_spark and rewrites
# the test modules' assertions again (about 12 s of every worker's collection).
test test-fast: export PYTHONDONTWRITEBYTECODE :=
test: lint check-java
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
	$(BIN)/python -m pytest --connect

# The unit tier only (tests/conftest.py): pure Python and numpy, no JVM, so no Java needed.
test-fast: lint
	$(BIN)/python -m pytest -m unit -n $(TEST_WORKERS)

# The linter and the type checker (settings in pyproject.toml).
lint: $(VENV)/.installed-test
	$(BIN)/ruff check dp_spark tests bench scripts
	$(BIN)/mypy

# The driver's environment in one file for a cluster's executors (docs/cluster.md); rebuilt only
# when the code or .venv's packages changed. scripts/submit.sh --package ships it.
package: install
	scripts/package.sh

# Numbers, not a test: see docs/lab/performance.md. BENCH_FULL=1 adds the 100M-row table.
bench: install check-java
	$(BIN)/dp-spark bench --rows $(BENCH_ROWS) --out bench/results

# Paper 000's comparison on MovieLens 1M and the Netflix-shaped table: docs/lab/reproduction_000.md.
reproduce-000: $(VENV)/.installed-test check-java
	PYSPARK_PYTHON=$(abspath $(BIN)/python) $(BIN)/python scripts/reproduce_000.py

# Paper 001's DPSense and DPSense-S against LPA, ALPA, FPA, GS: docs/lab/reproduction_001.md.
reproduce-001: $(VENV)/.installed-test check-java
	PYSPARK_PYTHON=$(abspath $(BIN)/python) $(BIN)/python scripts/reproduce_001.py

# Paper 002's AHP against the corrected DPA-AHP: docs/lab/reproduction_002.md.
reproduce-002: $(VENV)/.installed-test check-java
	PYSPARK_PYTHON=$(abspath $(BIN)/python) $(BIN)/python scripts/reproduce_002.py

# Paper 003's FRAPP schemes on UCI Adult (CENSUS): docs/lab/reproduction_003.md.
reproduce-003: $(VENV)/.installed-test check-java
	PYSPARK_PYTHON=$(abspath $(BIN)/python) $(BIN)/python scripts/reproduce_003.py

# Paper 004's location-entropy experiments on generated Sparse and scaled Dense data: docs/lab/reproduction_004.md.
reproduce-004: $(VENV)/.installed-test check-java
	PYSPARK_PYTHON=$(abspath $(BIN)/python) $(BIN)/python scripts/reproduce_004.py

# Our SRA item counts next to Tumult Analytics' and PipelineDP's, each in its own venv
# (Tumult needs PySpark 3.5 and pandas < 2), and next to Tumult again on a plain Parquet source,
# the path a user's own table takes. PEER_ROWS=N picks the table size.
bench-peers: install check-java $(TMLT_VENV)/.installed $(PDP_VENV)/.installed
	@[ -f $(PEER_DATA) ] || $(BIN)/dp-spark generate netflix --rows $(PEER_ROWS) --out $(PEER_DATA)
	$(BIN)/python bench/peers.py --pair tumult --peer-python $(TMLT_VENV)/bin/python --data $(PEER_DATA) --repeats $(PEER_REPEATS)
	$(BIN)/python bench/peers.py --pair tumult --ours dp-spark-plain --peer-python $(TMLT_VENV)/bin/python --data $(PEER_DATA) --repeats $(PEER_REPEATS)
	$(BIN)/python bench/peers.py --pair pipelinedp --peer-python $(PDP_VENV)/bin/python --data $(PEER_DATA) --repeats $(PDP_REPEATS) --warmups 1
	$(BIN)/python bench/peers.py --table bench/results/peers

$(PDP_VENV)/.installed:
	@[ -x $(PDP_VENV)/bin/python ] || $(PYTHON) -m venv $(PDP_VENV)
	$(PDP_VENV)/bin/python -m pip install --quiet pipeline-dp dp-accounting "pyspark>=4.2,<5" "pandas<3" pyarrow
	@touch $@

$(TMLT_VENV)/.installed:
	@[ -x $(TMLT_VENV)/bin/python ] || $(PYTHON) -m venv $(TMLT_VENV)
	$(TMLT_VENV)/bin/python -m pip install --quiet tmlt.analytics pyarrow
	@touch $@

install: $(VENV)/.installed

# .venv from the Python found, refused before anything is installed if it is older than 3.11.
define make_venv
@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "dp-spark needs Python 3.11 or newer")'
@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
endef

$(VENV)/.installed: pyproject.toml
	$(make_venv)
	$(BIN)/python -m pip install --quiet -e '.[all]'
	@touch $@

# The test tools with the rest in one pip run (one resolve: 53 s from a fresh clone against 63 s in two).
$(VENV)/.installed-test: pyproject.toml
	$(make_venv)
	$(BIN)/python -m pip install --quiet -e '.[all,test,plot]'
	@touch $(VENV)/.installed $@

$(DEMO_DATA): | $(VENV)/.installed
	$(BIN)/dp-spark generate netflix --rows 1000000 --out $@

check-java:
	@command -v java >/dev/null 2>&1 || [ -x "$$JAVA_HOME/bin/java" ] || { \
	  echo "Java 17 is required by Spark and was not found (no java on PATH, no JAVA_HOME)."; \
	  echo "Install it, e.g. 'sudo apt-get install openjdk-17-jre-headless' (Debian/Ubuntu)"; \
	  echo "or 'brew install openjdk@17' (macOS), then run make again."; exit 1; }

clean:
	rm -rf $(VENV) $(PDP_VENV) out data dist .pytest_cache
