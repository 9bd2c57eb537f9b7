# kgctl's two set-up commands are `make demo` and `make test`; everything they need is
# installed from here (a clean clone has nothing else).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: setup system-deps kafka kafka-tools demo test test-fast lint docs bench bench-smoke mutation clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	rm -f $(VENV)/.installed-* && touch $@

setup: $(STAMP)

# Java 17 and Maven run the local broker; Chromium renders the HTML report in its test;
# Prometheus (and promtool) scrape `kgctl monitor` and check its example rules in a test.
system-deps:
	@missing=""; \
	command -v java >/dev/null || missing="$$missing openjdk-17-jre-headless"; \
	command -v javac >/dev/null || missing="$$missing openjdk-17-jdk-headless"; \
	command -v mvn >/dev/null || missing="$$missing maven"; \
	command -v chromium >/dev/null || missing="$$missing chromium"; \
	command -v kcat >/dev/null || missing="$$missing kcat"; \
	command -v prometheus >/dev/null || missing="$$missing prometheus"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; \
	  else echo "please install:$$missing (Debian package names)"; exit 1; fi; \
	fi

# Resolve Apache Kafka's jars once (Maven; cached in ~/.cache/kgctl): the default
# version and those of the compatibility tier (tests/compat).
COMPAT_KAFKA_VERSIONS := 3.7.2 3.9.1
kafka: setup
	$(BIN)/python -c "from kgctl.broker.provision import resolve_kafka; print(resolve_kafka(say=print))"
	for v in $(COMPAT_KAFKA_VERSIONS); do \
	  $(BIN)/python -c "from kgctl.broker.provision import resolve_kafka; print(resolve_kafka('$$v', say=print))" || exit 1; \
	done

# Apache Kafka's kafka-tools jars (its Java VerifiableConsumer, a KIP-848 member for the
# tests and the Java member of the benchmarks); Maven once, cached in ~/.cache/kgctl.
kafka-tools: setup system-deps
	$(BIN)/python -c "from kgctl.broker.provision import resolve_kafka_tools; print(resolve_kafka_tools(say=print))"

# The local Kafka stays up afterwards for trying kgctl by hand: `kgctl broker down` stops it.
demo: setup system-deps
	$(BIN)/kgctl demo --keep-broker

lint: setup
	$(BIN)/ruff check kgctl tests $(wildcard bench)
	$(BIN)/ruff format --check kgctl tests $(wildcard bench)
	$(BIN)/mypy

# system-deps installs Chromium, so here its test must run, not skip.
test: setup system-deps kafka kafka-tools lint
	KGCTL_REQUIRE_CHROMIUM=1 $(BIN)/pytest

# Only the tests that need no broker (the Chromium test skips where there is no browser).
test-fast: setup
	$(BIN)/pytest -m "not kafka"

docs: setup
	$(BIN)/python -m kgctl.cli.docgen

# Mutation testing of the pure judges (kgctl/model, kgctl/chaos/checks.py) against the
# pure tests, with mutmut ([tool.mutmut] in pyproject.toml). Not part of `make test` or
# CI: minutes on this machine; the surviving mutants and why they stay: docs/testing.md.
mutation: setup
	$(BIN)/pip install --quiet 'mutmut>=3.8,<4'
	rm -rf mutants
	$(BIN)/mutmut run --max-children 2
	$(BIN)/mutmut results

# The full benchmark (about an hour: its own broker, Java consumers fetched with Maven);
# results in bench/results/, method and tables in docs/benchmarks.md.
bench: setup system-deps kafka kafka-tools
	$(BIN)/python -m bench.run --out bench/results/full.json

# Seconds long; CI runs the same through tests/test_bench_smoke.py.
bench-smoke: setup system-deps kafka
	$(BIN)/python -m bench.run --smoke --out bench/results/smoke.json

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache mutants
