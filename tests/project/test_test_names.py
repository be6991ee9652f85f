"""A product module's tests are findable by name (issue 26 item 7).

The convention: the tests of `<package>/.../<module>.py` live in `tests/<area>/test_<module>.py`, where the
area is the kind (or layer) the module belongs to (AREAS, longest prefix wins: providers/machines/lease.py
-> tests/machines/test_lease.py, the adapter providers/maas_machine.py -> tests/machines/test_maas_machine.py).
A module whose tests are split by aspect keeps its name as the prefix: `test_<module>_<aspect>.py`
(tests/machines/test_lease_openbao.py is more of providers/machines/lease.py's tests).

Checked for every module of providers/, components/, clients/ and environments/ that some test file
(tests/**/test_*.py) imports, except a package `__init__` (a namespace; its modules are the tested units)
and the modules in EXCEPTIONS, each with the test file that exercises it (None for vocabulary: enums, types,
protocols that every test of its area builds with) and the reason it has no file of its own.
(stacks/ holds only stack settings, no module.)
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
PRODUCT = ("providers", "components", "clients", "environments")

# module prefix -> test area (a directory of tests/); the longest matching prefix wins
AREAS: dict[str, str] = {
    "providers": "providers",  # the adapters' shared parts: kind descriptors, common helpers, wire types
    "providers.machines": "machines",
    "providers.maas_machine": "machines",
    "providers.machine_pool": "machines",
    "providers.sites": "sites",
    "providers.site_profile": "sites",
    "providers.bootstrap_bundle": "sites",
    "providers.roce_assignment": "sites",
    "providers.apps": "apps",
    "providers.app_instance": "apps",
    "providers.hosts": "ansible",
    "providers.hosts.mounts": "providers",  # mount units (WEKA), not ansible: beside the other kinds' shared parts
    "providers.host_convergence": "ansible",
    "providers.machines.node_trust": "node",  # the node's trust of the site's CA: only real nodes show it
    "components": "components",
    "clients.platform": "platform",
    "clients.maas": "maas_sim",
    "clients.vault": "vault",
    "clients.tls": "tls",
    "clients.ansible": "ansible",
    "clients.threadsafe_ast": "project",
    "environments": "environments",
}

# module -> (the test file that exercises it, or None for vocabulary; why it has no tests/<area>/test_<module>.py)
EXCEPTIONS: dict[str, tuple[str | None, str]] = {
    "clients.platform.catalogue": ("tests/platform/test_client_roundtrip.py",
                                   "the API's endpoint catalogue; tested by the client's round trips and the "
                                   "contract tests (tests/platform/test_contract_*.py)"),
    "clients.platform.transport": ("tests/platform/test_client_faults.py", "the client's request path; tested "
                                   "through the client (faults, retries, idempotency keys)"),
    "clients.s3": ("tests/sites/test_bootstrap_bundle.py", "the artifact store; tested against moto S3 with the "
                   "bundles it publishes"),
    "components.apps": ("tests/apps/test_platform_ca.py", "wiring of app instances; tested with their kind"),
    "components.host_roles": ("tests/ansible/test_host_convergence.py", "the compiled host inventory; tested with "
                              "the HostConvergence kind"),
    "components.machines": ("tests/sites/test_bundle_mounts.py", "wiring of machines and pools; tested through "
                            "what it hands the bundles, and by the stack tests (tests/stack/)"),
    "components.settings": ("tests/components/test_stack.py", "the stack settings; tested with the pipeline that "
                            "reads them"),
    "components.site": ("tests/sites/test_bundle_mounts.py", "wiring of sites, profiles and bundles; tested through "
                        "the bundles it declares"),
    "environments.documents": ("tests/environments/test_loader_bad_input.py", "the loader's safe document reading; "
                               "tested with the loader's bad input"),
    "environments.vocabulary": (None, "the tier, fabric and erase modes the model and rules_policy name"),
    "environments.findings": (None, "the finding catalogue and types every validation test asserts"),
    "environments.model": (None, "the compiled environment's models; validated through the loader's tests"),
    "environments.pins": ("tests/cli/test_pin.py", "the pins file; tested with the `pin` command that writes it"),
    "environments.rules_values": ("tests/policy/test_rules.py", "value rules the policy pack shares; tested there"),
    "providers.apps.failures": ("tests/apps/test_faults.py", "the reconciler's failure; tested by the faults that "
                                "raise it"),
    "providers.apps.spec": ("tests/apps/test_app_instance.py", "AppInstance's input model; tested through the "
                            "adapter's check"),
    "providers.common": ("tests/sites/test_kinds_contract.py", "helpers the adapters share; tested through the "
                         "kinds' contract"),
    "providers.hosts.convergence": ("tests/ansible/test_host_convergence.py", "HostConvergence's core; tested with "
                                    "its adapter"),
    "providers.hosts.failures": ("tests/tools/test_failure_codes.py", "HostConvergence's failure catalogue; checked "
                                 "against its doc with every catalogue, each code raised in "
                                 "tests/ansible/test_host_convergence.py"),
    "providers.machines.cloud_init": ("tests/node/test_nspawn_node.py", "the deploy's user_data; run by real "
                                      "cloud-init on nspawn nodes"),
    "providers.machines.ports": (None, "protocols only; the fakes of tests/machines implement them"),
    "providers.machines.records": (None, "the lifecycle's records and context, which its tests build with"),
    "providers.machines.resource_io": ("tests/machines/test_machine_pool.py", "the adapters' shared inputs and wire "
                                       "translation; tested with the adapters"),
    "providers.machines.runtime": ("tests/node/test_lifecycle_nodes.py", "the real ports (MAAS, platform, S3) "
                                   "wired together; tested by the node tier"),
    "providers.machines.spec": ("tests/machines/test_maas_machine.py", "the machine's input model; classified and "
                                "diffed with the adapter"),
    "providers.machines.status": (None, "the machines' status enums"),
    "providers.sites.bundle_checks": ("tests/sites/test_bundle_render.py", "the rendered bundle's checks; tested "
                                      "with the rendering"),
    "providers.sites.bundle_node": ("tests/node/test_node_trust.py", "a bundle's vendor apt sources; tested on "
                                    "real nodes with a signed vendor repository"),
    "providers.sites.failures": ("tests/tools/test_failure_codes.py", "the site kinds' failure catalogues; checked "
                                 "against their doc with every catalogue, the codes raised in the kinds' tests"),
    "providers.sites.profile": ("tests/sites/test_site_profile.py", "SiteProfile's core; tested with its adapter "
                                "against the simulators"),
    "providers.wire": (None, "the providers' enums and scalar types (their state compatibility: tests/compat)"),
}


def _dotted(path: Path, repo: Path = REPO) -> str:
    rel = path.relative_to(repo).with_suffix("")
    return ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)


def product_modules(repo: Path = REPO) -> dict[str, Path]:
    """Every importable product module but the package namespaces (`__init__`), of the checkout (or `repo`)."""
    paths = [p for root in PRODUCT for p in (repo / root).rglob("*.py")]
    return {_dotted(p, repo): p for p in paths if p.name != "__init__.py" and "-" not in p.stem}


def imported_by_tests(modules: dict[str, Path], repo: Path = REPO) -> dict[str, list[str]]:
    """module -> the test files that import it (`from m import x`, `from pkg import m`, `import m`)."""
    users: dict[str, list[str]] = {}
    for path in sorted((repo / "tests").rglob("test_*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
                names.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
        for module in names & modules.keys():
            users.setdefault(module, []).append(str(path.relative_to(repo)))
    return users


def area(module: str) -> str:
    prefix = max((p for p in AREAS if module == p or module.startswith(p + ".")), key=len, default=None)
    return AREAS[prefix] if prefix else module.split(".")[0]


def named_files(module: str, repo: Path = REPO) -> list[Path]:
    directory, stem = repo / "tests" / area(module), module.rsplit(".", 1)[-1]
    return [directory / f"test_{stem}.py", *sorted(directory.glob(f"test_{stem}_*.py"))]


def unfindable(repo: Path = REPO) -> list[str]:
    """Tested product modules without a test file named after them, in the checkout (or `repo`)."""
    modules = product_modules(repo)
    wrong = []
    for module, users in sorted(imported_by_tests(modules, repo).items()):
        if module in EXCEPTIONS or any(p.exists() for p in named_files(module, repo)):
            continue
        wrong.append(f"{modules[module].relative_to(repo)}: no {named_files(module, repo)[0].relative_to(repo)} "
                     f"(imported by {', '.join(users[:3])}{', ...' if len(users) > 3 else ''}); name the file "
                     f"of its tests so, or add it to EXCEPTIONS with the reason")
    return wrong


def test_every_tested_product_module_has_a_test_file_named_after_it() -> None:
    wrong = unfindable()
    assert not wrong, "\n".join(wrong)


def test_exceptions_are_current() -> None:
    """An exception for a module that now has its file, or that no test imports any more, goes."""
    modules = product_modules()
    users = imported_by_tests(modules)
    stale = [m for m in EXCEPTIONS if m not in users or any(p.exists() for p in named_files(m))]
    assert not stale, f"remove from EXCEPTIONS: {stale}"
    gone = [f"{m}: {where}" for m, (where, _) in EXCEPTIONS.items() if where and not (REPO / where).is_file()]
    assert not gone, f"EXCEPTIONS name test files that do not exist: {gone}"


def test_every_area_is_a_test_directory() -> None:
    used = {area(m) for m in imported_by_tests(product_modules()) if m not in EXCEPTIONS}
    missing = sorted(a for a in used if not (TESTS / a / "__init__.py").exists())
    assert not missing, f"test areas that are not test directories: {missing}"


def test_the_check_can_fail(tmp_path: Path) -> None:
    """A module some test imports, with no file named after it, is reported. The probe is a tree of its own,
    outside the checkout: the other workers' scans of the checkout must never see it (one did, and read a
    probe file this test had just removed)."""
    probe = tmp_path / "providers" / "machines" / "_names_probe.py"
    user = tmp_path / "tests" / "machines" / "test_zz_names_user.py"
    for path, text in ((probe, "X = 1\n"), (user, "from providers.machines._names_probe import X\n")):
        path.parent.mkdir(parents=True)
        path.write_text(text)
    wrong = unfindable(tmp_path)
    want = "providers/machines/_names_probe.py: no tests/machines/test__names_probe.py"
    assert any(w.startswith(want) for w in wrong), wrong
