# CLI-free test engine (engine, docs/engine.md).
.PHONY: engine-test engine-bench

engine-test: setup
	@$(PY) -m pytest tests/engine $(PYTEST_ARGS)

engine-bench: setup
	@$(PY) -m benchmarks.bench_engine
