"""The lifecycle's account of a failed commissioning or testing run (providers/machines/script_failures.py):
the failing script as MAAS recorded it, its exit status and its output's tail, redacted of secrets."""

from __future__ import annotations

import pytest

from clients.maas import MaasError, ScriptResultView, ScriptStatus
from providers.machines.script_failures import TAIL_IN_REASON, describe, failed_scripts, redact


@pytest.mark.parametrize(("text", "hidden", "kept"), [
    ("ipmi password=hunter2 ok", "hunter2", "ipmi password=[redacted] ok"),
    ("BMC_PASS: s3cr3t", "s3cr3t", "BMC_PASS: [redacted]"),
    ('token: "abc def"', "abc def", "token: [redacted]"),
    ("token_secret: Zq9xTuv0", "Zq9xTuv0", "token_secret: [redacted]"),
    ("export AWS_SECRET_ACCESS_KEY=abcd1234", "abcd1234", "AWS_SECRET_ACCESS_KEY=[redacted]"),
    ("Authorization: Bearer xyz.abc", "xyz.abc", "Authorization: [redacted]"),
    ('oauth_signature="&Zq9xTuv0", oauth_nonce="1"', "Zq9xTuv0", "oauth_nonce"),
    ("fetch https://admin:pw123@repo.example/x", "pw123", "https://admin:[redacted]@repo.example/x"),
    ("key AKIAABCDEFGHIJKLMNOP used", "AKIAABCDEFGHIJKLMNOP", "key [redacted] used"),
    ("GET /b/o?X-Amz-Signature=deadbeef&x=1", "deadbeef", "X-Amz-Signature=[redacted]&x=1"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNz\n-----END OPENSSH PRIVATE KEY-----\nafter", "b3BlbnNz",
     "[redacted private key]\nafter"),
])
def test_secret_looking_values_are_redacted_and_the_rest_kept(text: str, hidden: str, kept: str) -> None:
    out = redact(text)
    assert hidden not in out
    assert kept in out


def test_ordinary_output_is_left_alone_and_known_values_are_redacted_anywhere() -> None:
    text = "link mlx5_0/1 state DOWN physical_state LINK_UP netdev ens1f0np0\npassword policy: strong"
    assert redact(text) == text
    assert redact("the node said 0123456789abcdef twice: 0123456789abcdef", known=["0123456789abcdef"]) == \
        "the node said [redacted] twice: [redacted]"


class _Ops:
    def __init__(self, results: list[ScriptResultView] | Exception) -> None:
        self.results = results
        self.asked: list[tuple[str, str]] = []

    def script_results(self, system_id: str, kind: str = "testing") -> list[ScriptResultView]:
        self.asked.append((system_id, kind))
        if isinstance(self.results, Exception):
            raise self.results
        return self.results


def _result(name: str, status: ScriptStatus, exit_status: int | None, output: str) -> ScriptResultView:
    return ScriptResultView(name=name, status=int(status), status_name=status.name.capitalize(),
                            exit_status=exit_status, output=output)


def test_the_failing_scripts_are_named_with_exit_status_and_redacted_output_tail() -> None:
    long = "x" * 1000 + "\nlink mlx5_3/1 state DOWN\nbmc password=hunter2\n"
    ops = _Ops([_result("gpuaas-fabric-check", ScriptStatus.FAILED, 1, long),
                _result("smartctl-validate", ScriptStatus.PASSED, 0, "fine\n"),
                _result("memtester", ScriptStatus.TIMEDOUT, 124, "")])
    text = failed_scripts(ops, "abc123", "testing")  # type: ignore[arg-type]
    assert ops.asked == [("abc123", "testing")]
    assert text.startswith("MAAS testing results: gpuaas-fabric-check: failed, exit 1, output: ...")
    assert "link mlx5_3/1 state DOWN | bmc password=[redacted]" in text and "hunter2" not in text
    assert "smartctl-validate" not in text, "only the failing scripts"
    assert text.endswith("; memtester: timedout, exit 124, output: (no output)")
    tail = describe(ops.results[0]).split("output: ", 1)[1]  # type: ignore[index]
    assert len(tail) <= TAIL_IN_REASON + len("...") + 5


def test_nothing_is_said_when_maas_names_no_failure_or_cannot_be_read() -> None:
    assert failed_scripts(_Ops([]), "abc123", "commissioning") == ""  # type: ignore[arg-type]
    assert failed_scripts(_Ops(MaasError("down", status=503)), "abc123", "testing") == ""  # type: ignore[arg-type]
