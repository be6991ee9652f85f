# Operations (issue 17): the Vault checklist of an environment and the read-only pre-flight doctor.
# Vault credentials come from VAULT_TOKEN (or VAULT_ROLE_ID + VAULT_SECRET_ID), never from flags.
DOCTOR_STACK ?= $(ENV)
DOCTOR_ARGS ?=

.PHONY: secrets secrets-template doctor doctor-demo test-ops
secrets: setup  ## list the Vault entries ENV needs: path, key, shape, which resource reads it and when
	@$(PY) -m cli.main secrets $(ENV)

secrets-template: setup  ## print a YAML fill-in template of ENV's Vault entries (values empty)
	@$(PY) -m cli.main secrets $(ENV) --template

doctor: setup  ## read-only pre-flight checks of ENV (DOCTOR_ARGS="--config embedded_maas_url=..." for embedded)
	@$(PY) -m cli.main doctor $(ENV) --stack $(DOCTOR_STACK) $(DOCTOR_ARGS)

doctor-demo: setup  ## doctor of the local environment against freshly started embedded simulators
	@$(PY) -c 'import os, sys; from simulators.localstack import LocalStack; from cli.main import main; \
	w = LocalStack("local").start(); c = w.stack_config(); os.environ["VAULT_TOKEN"] = c.pop("gpuaas-infra:vault_token"); \
	rc = main(["doctor", "local", *(f"--config={k}={v}" for k, v in c.items() if "embedded" in k)]); w.stop(); sys.exit(rc)'

test-ops: setup  ## the secrets and doctor tests (tests/cli)
	@$(PY) -m pytest tests/cli $(PYTEST_ARGS)
