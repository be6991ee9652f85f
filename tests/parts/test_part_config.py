"""`gpuaas-infra:part` and `gpuaas-infra:siteStacks`: parsed into a typed part, and every mistake reported
as a finding with its code, the stack file, the config path and a fix hint (before anything runs)."""

from __future__ import annotations

import pytest

from components.settings import PartKind, StackConfigInvalid, StackPart, StackSettings, part_findings
from environments import load_environment
from environments.findings import Code


@pytest.fixture(scope="module")
def prod():  # type: ignore[no-untyped-def]
    return load_environment("prod")


@pytest.mark.parametrize(("text", "kind", "site"), [
    ("all", PartKind.ALL, None), ("control", PartKind.CONTROL, None), ("site:dal1", PartKind.SITE, "dal1")])
def test_parts_parse(text: str, kind: PartKind, site: str | None) -> None:
    part = StackPart.parse(text)
    assert (part.kind, part.site, str(part)) == (kind, site, text)


def test_the_default_part_is_the_whole_environment() -> None:
    settings = StackSettings.from_config("prod", {})
    assert settings.part.kind is PartKind.ALL
    assert settings.part.declares_site("dal1") and settings.part.declares_control


@pytest.mark.parametrize("text", ["bogus", "site:", "site", "control:dal1", "all:x"])
def test_a_malformed_part_is_a_stk001_finding(text: str) -> None:
    with pytest.raises(StackConfigInvalid) as caught:
        StackSettings.from_config("prod-dal1", {"part": text})
    [f] = caught.value.findings
    assert (f.code, f.file, f.path) == (Code.STACK_CONFIG_INVALID, "stacks/Pulumi.prod-dal1.yaml", "gpuaas-infra:part")
    assert "site:<site name>" in f.message


def test_an_unknown_site_is_a_stk005_finding(prod) -> None:  # type: ignore[no-untyped-def]
    settings = StackSettings.from_config("prod-nyc1", {"environment": "prod", "part": "site:nyc1"})
    [f] = part_findings(prod, settings)
    assert (f.code, f.file, f.path) == (Code.PART_UNKNOWN_SITE, "stacks/Pulumi.prod-nyc1.yaml", "gpuaas-infra:part")
    assert "'nyc1' is not a site of environment prod (sites: dal1, sjc1)" in f.message
    assert f.hint == "use one of: site:dal1, site:sjc1, control, all"


def test_site_stacks_name_known_sites_in_a_control_stack_only(prod) -> None:  # type: ignore[no-untyped-def]
    control = StackSettings.from_config("prod-control", {"part": "control",
                                                         "siteStacks": '{"dal1": "prod-dallas", "nyc1": "x"}'})
    [f] = part_findings(prod, control)
    assert (f.code, f.path) == (Code.SITE_STACKS_INVALID, "gpuaas-infra:siteStacks.nyc1")
    assert control.site_stack(prod, "dal1") == "prod-dallas" and control.site_stack(prod, "sjc1") == "prod-sjc1"
    site = StackSettings.from_config("prod-dal1", {"part": "site:dal1", "siteStacks": {"dal1": "prod-dal1"}})
    [g] = part_findings(prod, site)
    assert g.code is Code.SITE_STACKS_INVALID and "only a control stack reads site stacks" in g.message
