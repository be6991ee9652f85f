# Sites, profiles, bootstrap bundles, RoCE assignments and Vault (docs/sites-bundles-roce.md).
.PHONY: test-sites
test-sites: setup
	@$(PY) -m pytest tests/vault tests/sites $(PYTEST_ARGS)
