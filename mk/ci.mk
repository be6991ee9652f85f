# CI pipeline checks (owner: preview notes / pipeline). Included by the Makefile.
CI_SCHEMA_PKG := check-jsonschema==0.39.0

.PHONY: ci-lint
# Offline check of .gitlab-ci.yml: GitLab's JSON schema (vendored by check-jsonschema) + project rules.
ci-lint: setup
	@$(PY) -c "import check_jsonschema" 2>/dev/null || $(VENV)/bin/pip install -q --disable-pip-version-check $(CI_SCHEMA_PKG)
	@$(VENV)/bin/gpuaas-infra ci-lint .gitlab-ci.yml
