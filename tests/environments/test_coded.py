"""The one formatter of finding and failure lines (environments/coded.py), what every layer writes with it,
and the coded error a kind raises: its line, its client-error translation, its details."""

from __future__ import annotations

from enum import unique
from pathlib import Path

import pytest

from ci_lint.rules import Finding as CiFinding
from clients.vault import VaultError, VaultErrorKind
from components.settings import EmbeddedEndpointMissing, StackSettings
from environments.coded import CodedError, FailureCode, block, coded_errors, line, raises_coded
from environments.findings import Code, finding
from providers.machines.records import FailCode

REPO = Path(__file__).resolve().parents[2]


@unique
class ProbeFail(FailureCode):
    BROKE = ("PRB001", "it broke", "mend it")


def test_the_line_and_the_block() -> None:
    assert line("X001", "file.yaml: a.b", "bad", "do this") == "X001 file.yaml: a.b: bad; fix: do this"
    assert line("X001", "", "bad") == "X001 bad"
    assert line("X001", "w", "bad", level="error") == "ERROR X001 w: bad"
    assert block("X001", "f: p", "bad", "do this", "warning") == "WARNING X001 f: p\n    bad\n    fix: do this"


def test_every_writer_uses_it() -> None:
    """Validation findings (block), ci-lint findings, MCH reasons and stack settings all share the shape."""
    f = finding(Code.UNKNOWN_FIELD, "envs/x.yaml", "sites[0].x", "unknown field 'x'")
    assert f.render() == block("ENV002", "envs/x.yaml: sites[0].x", "unknown field 'x'", f.hint, "error")
    ci = CiFinding(code="CI023", path="job.tags", message="unknown runner tag 'docker'", hint="use sim")
    assert ci.render(".gitlab-ci.yml") == "CI023 .gitlab-ci.yml: job.tags: unknown runner tag 'docker'; fix: use sim"
    assert FailCode.DEPLOY("gpu-1 (system_id s1): deploy failed") == "MCH008 gpu-1 (system_id s1): deploy failed"
    with pytest.raises(EmbeddedEndpointMissing) as e:
        StackSettings(stack="local", environment="local").endpoint("embedded", "maas")
    assert str(e.value).startswith("STK001 stacks/Pulumi.local.yaml: gpuaas-infra:embedded_maas_url: ")
    assert "; fix: run the stack through `make demo`" in str(e.value)


def test_no_writer_formats_a_line_by_hand() -> None:
    """The six places that used to write `CODE where: message; fix: hint` themselves now call the formatter."""
    files = ["environments/findings.py", "ci_lint/rules.py", "providers/machines/records.py",
             "providers/apps/failures.py", "providers/hosts/convergence.py", "components/settings.py"]
    marks = ("fix: {", "{self.code.value} ", "{f.code.value} ", "{self.value} ")
    hand = [f"{f}: {m}" for f in files for m in marks if m in (REPO / f).read_text()]
    assert hand == []


def test_a_coded_error_is_one_line_with_details_under_it() -> None:
    err = ProbeFail.BROKE("thing t", "it fell over", details=["part a: gone", "part b: bent"])
    assert str(err) == "PRB001 thing t: it fell over; fix: mend it\n  part a: gone\n  part b: bent"
    assert err.code is ProbeFail.BROKE and err.hint == "mend it" and err.source is None
    assert str(ProbeFail.BROKE("t", "x", "other fix")) == "PRB001 t: x; fix: other fix"


def test_client_errors_become_the_kinds_code_keeping_their_advice() -> None:
    cause = VaultError(VaultErrorKind.SEALED, "http://vault:8200", "mount 'gpuaas' path 'a/b'")

    class Rec:
        where = "thing t"

        @raises_coded({VaultError: ProbeFail.BROKE})
        def run(self) -> None:
            raise cause

        @raises_coded({VaultError: ProbeFail.BROKE})
        def other(self) -> None:
            raise KeyError("not a client error")

    with pytest.raises(CodedError) as e:
        Rec().run()
    assert str(e.value).startswith("PRB001 thing t: Vault sealed: mount 'gpuaas' path 'a/b' at http://vault:8200; ")
    assert str(e.value).endswith("unseal Vault (vault operator unseal) and retry; nothing was changed")
    assert e.value.source is cause and e.value.__cause__ is None and e.value.__suppress_context__
    with pytest.raises(KeyError):
        Rec().other()
    coded = ProbeFail.BROKE("inner", "already coded")
    with pytest.raises(CodedError) as e, coded_errors("outer", {Exception: ProbeFail.BROKE}):
        raise coded
    assert e.value is coded  # never wrapped twice
