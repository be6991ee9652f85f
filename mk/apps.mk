# App instances (issue 7): AppInstance provider, apps component, tests and benchmark.
.PHONY: test-apps bench-apps
test-apps: setup  ## AppInstance: planner, reconciler on the platform simulator, faults, boundary, engine on the local stack
	@$(PY) -m pytest tests/apps $(PYTEST_ARGS)

bench-apps: setup  ## member-operation parallelism, no-op converge overhead, planning cost
	@$(PY) benchmarks/bench_apps.py
