# The three-host lab (lab) and the host-roles tests. `make test` runs the lab tier too when
# the machine allows it (root + the Debian packages of tools/apt-packages.txt); otherwise that tier
# is skipped with the reason in the summary.
.PHONY: lab-preflight lab-build lab-up lab-clean lab-test ansible-check

lab-preflight: setup
	@$(PY) -m lab preflight

lab-build: setup
	@$(PY) -m lab build

lab-up: setup
	@$(PY) -m lab up

lab-clean: setup
	@$(PY) -m lab clean

lab-test: setup
	@$(PY) -m pytest tests/lab tests/ansible $(PYTEST_ARGS)

ansible-check: setup
	@$(PY) -m pytest tests/ansible $(PYTEST_ARGS)
