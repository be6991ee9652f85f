# MAAS simulator (issue 3): run it, test it, benchmark it.
MAAS_SIM_PORT ?= 5240
MAAS_SIM_INVENTORY ?= simulators/maas/inventories/example.yaml
MAAS_SIM_TIME_SCALE ?= 0.01

.PHONY: maas-sim test-maas-sim bench-maas-sim
maas-sim: setup  ## run the MAAS simulator in the foreground (prints MAAS_URL and MAAS_API_KEY)
	@$(PY) -m simulators.maas --port $(MAAS_SIM_PORT) --inventory $(MAAS_SIM_INVENTORY) --time-scale $(MAAS_SIM_TIME_SCALE)

test-maas-sim: setup  ## the simulator's own tests
	@$(PY) -m pytest tests/maas_sim $(PYTEST_ARGS)

bench-maas-sim: setup  ## request count per machine lifecycle: the machine providers' baseline
	@$(PY) benchmarks/bench_maas_sim.py

.PHONY: bench-scale
bench-scale: setup  ## fleet scale: one pool of 64, 256, 1024 machines (first up, efficiency, state, no-op, preview, refresh)
	@$(PY) benchmarks/bench_scale.py $(if $(SIZES),--sizes $(SIZES),)
	@$(PY) benchmarks/bench_resolve.py
