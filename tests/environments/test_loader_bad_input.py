"""Bad input refused before anything runs, each with one precise finding (issue 14's list): broken or
hostile documents, and values MAAS, Vault or the tiers would refuse later."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from environments import EnvironmentInvalid, load_environment, validate_environment
from environments.documents import MAX_ALIAS_NODES, MAX_BYTES, alias_expansion
from environments.findings import Code
from environments.loader import ENVIRONMENTS_DIR

Doc = dict[str, Any]


def _doc(name: str = "dev") -> Doc:
    return yaml.safe_load((ENVIRONMENTS_DIR / f"{name}.yaml").read_text())


def _codes(path: Path) -> list[tuple[str, str]]:
    env, found = validate_environment(path)
    assert env is None, "the document must be refused"
    for f in found:
        assert f.file and f.hint, f
    return [(f.code.value, f.path) for f in found]


def _write(tmp_path: Path, text: str | bytes, name: str = "bad.yaml") -> Path:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


def test_duplicate_key_names_its_path_and_line(tmp_path: Path) -> None:
    text = (ENVIRONMENTS_DIR / "dev.yaml").read_text().replace(
        "batch_max_parallel:", "batch_max_parallel: 2\n        batch_max_parallel:", 1)
    assert text.count("batch_max_parallel") >= 2
    found = _codes(_write(tmp_path, text))
    assert found[0][0] == Code.DUPLICATE_KEY.value and found[0][1].endswith("profiles[0].batch_max_parallel")


def test_non_utf8_is_a_finding_not_a_traceback(tmp_path: Path) -> None:
    assert _codes(_write(tmp_path, b"name: dev\ndescription: caf\xe9\n")) == [(Code.NOT_UTF8.value, "line 2")]


def test_alias_bomb_is_refused_quickly(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, "
              f"*a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, 9)]
    start = time.monotonic()
    found = _codes(_write(tmp_path, "\n".join(lines) + "\nname: x\n"))
    assert found == [(Code.DOCUMENT_TOO_LARGE.value, "")]
    assert time.monotonic() - start < 5


def test_oversized_document(tmp_path: Path) -> None:
    assert _codes(_write(tmp_path, "name: x\n" + "#" * MAX_BYTES)) == [(Code.DOCUMENT_TOO_LARGE.value, "")]


def test_blueprint_never_escapes_the_blueprints_folder(tmp_path: Path) -> None:
    doc = _doc()
    doc["blueprint"] = "../prod"
    found = _codes(_write(tmp_path, yaml.safe_dump(doc)))
    assert (Code.INVALID_VALUE.value, "blueprint") in found


def _case(edit: Callable[[Doc], None], base: str = "dev") -> Callable[[Path], list[tuple[str, str]]]:
    def run(tmp_path: Path) -> list[tuple[str, str]]:
        doc = _doc(base)
        edit(doc)
        return _codes(_write(tmp_path, yaml.safe_dump(doc)))

    return run


def _machine(doc: Doc, **kw: Any) -> None:
    doc["machines"][0].update(kw)


CASES: dict[str, tuple[Callable[[Path], list[tuple[str, str]]], tuple[str, str]]] = {
    "bool for an int": (_case(lambda d: d["sites"][0]["profiles"][0].update(batch_max_parallel=True)),
                        (Code.INVALID_VALUE.value, "sites[0].profiles[0].batch_max_parallel")),
    "bool for a network": (_case(lambda d: d.update(host_network=True)), (Code.INVALID_VALUE.value, "host_network")),
    "dot-dot in a Vault path": (_case(lambda d: d["sites"][0].update(maas_api_key_path="dev/../prod/maas#api_key")),
                                (Code.INVALID_VALUE.value, "sites[0].maas_api_key_path")),
    "invalid MAAS tag": (_case(lambda d: _machine(d, tags=["gpu node"])),
                         (Code.INVALID_TAG.value, "machines[0].tags[0]")),
    "unknown distro series": (_case(lambda d: _machine(d, distro_series="wobbly")),
                              (Code.UNKNOWN_SERIES.value, "machines[0].distro_series")),
    "embedded endpoint in prod": (_case(lambda d: d["platform"].update(url="embedded"), "prod"),
                                  (Code.EMBEDDED_IN_REAL_TIER.value, "platform.url")),
    "secret in bundle values": (
        _case(lambda d: d["bootstrap_bundles"][0].setdefault("values", {}).update(db_password="hunter2-hunter2")),
        (Code.SECRET_IN_VALUES.value, "bootstrap_bundles[0].values.db_password")),
    "same node bound twice": (
        _case(lambda d: d["app_instances"][0]["members"]["worker"].update(
            nodes=list(d["app_instances"][1]["members"]["agent"]["nodes"][:1]))),
        (Code.NODE_BOUND_TWICE.value, "app_instances[1].members.agent.nodes[0]")),
    "two RoCE pools for one rail": (
        _case(lambda d: d["roce_pools"].append({**d["roce_pools"][0], "subnet": "10.250.9.0/24",
                                               "range": {"start": "10.250.9.10", "end": "10.250.9.20"}}), "local"),
        (Code.ROCE_POOL_DUPLICATE.value, "roce_pools[8].rail")),
    "RoCE range with the network address": (
        _case(lambda d: d["roce_pools"][0]["range"].update(start="10.224.0.0"), "local"),
        (Code.ROCE_RANGE_INVALID.value, "roce_pools[0].range.start")),
    "RoCE subnet overlapping the host network": (
        _case(lambda d: d["roce_pools"][0].update(subnet="10.213.0.0/24",
                                                  range={"start": "10.213.0.100", "end": "10.213.0.200"}), "local"),
        (Code.ROCE_POOL_OVERLAP.value, "roce_pools[0].subnet")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_value_gets_its_finding(case: str, tmp_path: Path) -> None:
    run, expected = CASES[case]
    found = run(tmp_path)
    assert expected in found, found


def test_a_secret_value_is_never_echoed(tmp_path: Path) -> None:
    doc = _doc()
    doc["bootstrap_bundles"][0].setdefault("values", {})["api_token"] = "s3cr3t-value-never-shown-x"
    with pytest.raises(EnvironmentInvalid) as exc:
        from environments import load_environment

        load_environment(_write(tmp_path, yaml.safe_dump(doc)))
    assert "s3cr3t-value-never-shown-x" not in str(exc.value)


_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**6), st.text(max_size=20), st.just([]),
                     st.just({}))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_mutations_never_crash_or_hang(tmp_path: Path, data: st.DataObject) -> None:
    """Any edit of a valid environment ends as a valid model or as findings with file, path and hint."""
    doc = _doc(data.draw(st.sampled_from(["local", "dev", "staging", "prod"])))
    for _ in range(data.draw(st.integers(1, 4))):
        node: Any = doc
        for _depth in range(data.draw(st.integers(0, 4))):
            keys = list(node) if isinstance(node, dict) else list(range(len(node))) if isinstance(node, list) else []
            if not keys:
                break
            key = data.draw(st.sampled_from(keys))
            if not isinstance(node[key], dict | list):
                break
            node = node[key]
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            continue
        key = data.draw(st.sampled_from(keys))
        action = data.draw(st.sampled_from(["set", "delete", "duplicate"]))
        if action == "set":
            node[key] = data.draw(_SCALARS)
        elif action == "delete":
            del node[key]
        elif isinstance(node, list):
            node.append(node[key])
    path = _write(tmp_path, yaml.safe_dump(doc))
    start = time.monotonic()
    env, found = validate_environment(path)
    assert time.monotonic() - start < 10
    assert env is not None or found
    for f in found:
        assert f.file and f.hint and f.code


def test_every_hint_points_at_something_that_exists() -> None:
    """Hints naming a repo file name one that exists (ENV002's names environments/README.md)."""
    import re

    from environments.findings import CATALOGUE
    from environments.loader import REPO_ROOT

    for code, (_, hint) in CATALOGUE.items():
        for ref in re.findall(r"[\w./-]+\.(?:md|yaml|py)", hint):
            assert (REPO_ROOT / ref).exists(), f"{code.value}'s hint names {ref}, which does not exist"
    readme = (ENVIRONMENTS_DIR / "README.md").read_text()
    assert all(code.value in readme for code in CATALOGUE), "environments/README.md lists every code"


def test_schema_and_rule_findings_come_out_together(tmp_path: Path) -> None:
    """One run reports a schema error (a RoCE pool with a bad rail) and a rule error elsewhere (two pools
    for one site and rail), at the author's own paths, without findings about the refused item."""
    doc = _doc()
    doc["roce_pools"][1]["rail"] = "one"  # schema: not an integer
    doc["roce_pools"][4]["rail"] = 3  # rule: rail 3 of site lab twice (pools 3 and 4)
    found = _codes(_write(tmp_path, yaml.safe_dump(doc, sort_keys=False)))
    assert (Code.INVALID_VALUE.value, "roce_pools[1].rail") in found
    rule_paths = [p for c, p in found if c == Code.ROCE_POOL_DUPLICATE.value]
    assert rule_paths and all(p.startswith(("roce_pools[3]", "roce_pools[4]")) for p in rule_paths), found


def test_a_top_level_schema_error_reports_schema_findings_only(tmp_path: Path) -> None:
    doc = _doc()
    doc["tier"] = "galactic"
    found = _codes(_write(tmp_path, yaml.safe_dump(doc, sort_keys=False)))
    assert found and all(c in (Code.INVALID_VALUE.value, Code.UNKNOWN_FIELD.value) for c, _ in found), found


def test_a_storage_layout_naming_a_device_the_sku_lacks_is_refused(tmp_path: Path) -> None:
    """Issue 15's bad input: the h200-boss-flat layout makes nvme0n1..7 /share0..7; a 1U cpu-small
    machine has only sda. Refused at validate/preview with the file, the path and the bundle named."""
    doc = _doc("dev")
    doc["machines"][0]["sku"] = "cpu-small"
    path = _write(tmp_path, yaml.safe_dump(doc, sort_keys=False))
    env, found = validate_environment(path)
    assert env is None
    storage = [f for f in found if f.code is Code.STORAGE_DEVICE_MISSING]
    assert len(storage) == 1, found
    f = storage[0]
    assert (f.file, f.path) == (str(path), "machines[0].sku")
    assert "nvme0n1" in f.message and "h200-boss-flat" in f.message and "dev-gpu-1" in f.message
    assert "bundle 'lab-h200' (steps/30-storage.sh)" in f.message and "(it has: sda)" in f.message
    assert "skus.cpu-small.block_devices" in f.hint


def test_a_fleet_sized_environment_is_not_an_alias_bomb(tmp_path: Path) -> None:
    """10,000 machines (1.4 MB, no alias) validate: the guard bounds what aliases add, not the size."""
    doc = yaml.safe_load((ENVIRONMENTS_DIR / "local.yaml").read_text())
    doc["sites"][0]["bmc_network"] = "172.16.0.0/16"
    doc["machine_pools"] = [{"name": "fleet", "site": "local", "profile": "h200-lab"}]
    doc["machines"] = [{"hostname": f"fleet-{i:05d}", "ipmi_address": f"172.16.{20 + i // 250}.{1 + i % 250}",
                        "pxe_mac": f"b0:7b:25:21:{i // 256:02x}:{i % 256:02x}", "sku": "h200", "site": "local",
                        "profile": "h200-lab", "pool": "fleet"} for i in range(10_000)]
    for pool in doc["roce_pools"]:
        net = f"10.{224 + int(pool['rail'])}"
        pool.update(subnet=f"{net}.0.0/16", range={"start": f"{net}.0.10", "end": f"{net}.255.250"})
    doc["hosts"] = [h for h in doc["hosts"] if not h.get("machine")]
    doc["app_instances"] = []
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    env = load_environment(path)
    assert len(env.machines) == 10_000


def test_a_few_aliases_in_a_large_document_pass_and_many_expansions_fail(tmp_path: Path) -> None:
    """Aliases are counted by what they add: one anchor reused a few times passes; reused so that it adds
    more than MAX_ALIAS_NODES nodes it is refused, however small the file."""
    assert alias_expansion(yaml.compose("a: &x [1, 2, 3]\nb: *x\nc: *x\n")) == 8
    anchor = "a: &x [" + ", ".join(["1"] * 1000) + "]\n"
    reused = anchor + "".join(f"b{i}: *x\n" for i in range(MAX_ALIAS_NODES // 1000 + 1))
    assert alias_expansion(yaml.compose(reused)) > MAX_ALIAS_NODES
    assert _codes(_write(tmp_path, reused + "name: x\n")) == [(Code.DOCUMENT_TOO_LARGE.value, "")]
