"""The Ansible tree passes ansible-lint (production profile, offline) and the playbook's syntax check
against inventories generated from every declared environment (same playbook for all of them)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clients.ansible import ANSIBLE_DIR, SITE_PLAYBOOK
from components.host_roles import inventory_hosts
from environments import declared_environments, validate_environment
from environments.model import HostRole
from providers.hosts.convergence import build_inventory

BIN = Path(sys.executable).parent


def _env() -> dict[str, str]:
    return {**os.environ, "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}


def test_ansible_lint_production_profile_passes() -> None:
    proc = subprocess.run([str(BIN / "ansible-lint"), "--offline", "--profile", "production", "--nocolor"],
                          cwd=ANSIBLE_DIR, capture_output=True, text=True, env=_env(), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Profile 'production' was required, and it passed" in proc.stdout + proc.stderr


ENVS_WITH_HOSTS = [n for n in declared_environments() if (e := validate_environment(n)[0]) is not None and e.hosts]


@pytest.mark.parametrize("name", ENVS_WITH_HOSTS)
def test_syntax_check_with_each_environments_generated_inventory(name: str, tmp_path: Path) -> None:
    env, _ = validate_environment(name)
    assert env is not None
    inv = tmp_path / "inventory.json"
    inv.write_text(json.dumps(build_inventory(inventory_hosts(env, {}))))
    proc = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inv), str(SITE_PLAYBOOK), "--syntax-check"],
                          capture_output=True, text=True, env=_env(), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "playbook: " in proc.stdout


def test_every_model_role_has_a_role_directory_and_a_site_entry() -> None:
    site = SITE_PLAYBOOK.read_text()
    for role in HostRole:
        assert (ANSIBLE_DIR / "roles" / role.value / "tasks" / "main.yml").is_file(), role
        assert f"- role: {role.value}" in site, role


def test_tasks_that_carry_secrets_are_no_log() -> None:
    """Every task that renders a secret variable hides its result and diff."""
    import yaml

    secret_vars = ("gpuaas_munge_key", "gpuaas_runner_tokens", "gpuaas_gitlab_root_password", "gpuaas_k3s_token",
                   "gpuaas_journal_ca_key")
    for tasks_file in (ANSIBLE_DIR / "roles").glob("*/tasks/main.yml"):
        role_dir = tasks_file.parents[1]
        for task in yaml.safe_load(tasks_file.read_text()) or []:
            body = json.dumps(task)
            src = (task.get("ansible.builtin.template") or {}).get("src")  # a template renders what it names
            if src:
                body += (role_dir / "templates" / src).read_text()
            if any(v in body for v in secret_vars) and "assert" not in json.dumps(list(task)):
                assert task.get("no_log") is True, f"{tasks_file}: task {task['name']!r} renders a secret"
