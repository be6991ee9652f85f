# Policy pack (owner: preview notes / pipeline). pulumi-policy pins protobuf 5.29, so the pack has
# its own virtualenv (.policy-venv), never the project's .venv (DESIGN.md §3.1).
POLICY_VENV := .policy-venv
POLICY_REQ_STAMP = $(POLICY_VENV)/.req-$(shell sha256sum policy/requirements.txt | cut -c1-16)

.PHONY: policy-venv policy-test
policy-venv: $(POLICY_REQ_STAMP)

$(POLICY_VENV)/.req-%: policy/requirements.txt
	@[ -x $(POLICY_VENV)/bin/python ] || python3 -m venv $(POLICY_VENV)
	@$(POLICY_VENV)/bin/pip install -q --disable-pip-version-check -r policy/requirements.txt 2> >(grep -v '^WARNING: Location' >&2)
	@tools/install-ast-guard.sh $(POLICY_VENV)
	@rm -f $(POLICY_VENV)/.req-*; touch $@

# `pulumi preview --policy-pack` by the real CLI (build/pulumi/bin) of the committed stacks and of broken ones.
policy-test: setup policy-venv
	@$(PY) -m pytest tests/policy $(PYTEST_ARGS)
