# GPUaaS platform API (issue 4): contract, typed client, simulator.
PLATFORM_SIM_PORT ?= 0
PLATFORM_SIM_TIME_SCALE ?= 1.0

.PHONY: platform-sim test-platform platform-contract platform-contract-check bench-platform
platform-sim: setup  ## run the platform simulator in the foreground (prints URL, admin and role tokens as JSON)
	@$(PY) -m simulators.platform --port $(PLATFORM_SIM_PORT) --time-scale $(PLATFORM_SIM_TIME_SCALE)

test-platform: setup  ## contract (schemathesis), client round-trip, authz, idempotency, enrollment, faults
	@$(PY) -m pytest tests/platform $(PYTEST_ARGS)

platform-contract: setup  ## regenerate contracts/platform-api.yaml from the catalogue and models
	@$(PY) -m clients.platform.contract --write

platform-contract-check: setup  ## fail if the committed contract differs from the models
	@$(PY) -m clients.platform.contract --check

bench-platform: setup  ## client overhead, client construction, simulator scaling, operation concurrency
	@$(PY) benchmarks/bench_platform.py
