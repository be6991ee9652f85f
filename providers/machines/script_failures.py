"""What a failed commissioning or testing run says in the lifecycle's error: the failing scripts as MAAS
recorded them (`nodes/{system_id}/results/current-<kind>/`), each with its exit status and the tail of its
combined output, redacted of secrets.

A script's output is whatever it printed, read back from MAAS: it can hold a BMC password, a token, a key.
`redact` replaces what looks like one before the text reaches an error, a note, Pulumi's diagnostics or
state: `key=value` / `key: value` pairs whose key names a secret (password, token, secret, api key, access
key, credential...), HTTP Authorization headers and OAuth signatures, PEM private key blocks, passwords in
URLs, AWS access key ids and presigned-URL signatures, and any value the caller knows to be secret.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from clients.maas import MaasError, ScriptResultView

from .ports import MachineOps

TAIL_IN_REASON = 400  # characters of a failed script's output an error carries (as a failed launcher step's)
REDACTED = "[redacted]"

_SECRET_KEY = (r"(?:[A-Za-z0-9_.-]*(?:pass(?:word|wd|phrase)?|secret|token|api[_-]?key|access[_-]?key|"
               r"private[_-]?key|credentials?|auth)[A-Za-z0-9_.-]*)")
_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S),
     "[redacted private key]"),
    (re.compile(r"(?i)(authorization\s*[:=]\s*)(?:bearer|basic|oauth|token)?\s*[^\n|]+"), r"\1" + REDACTED),
    (re.compile(r"(?i)\b(oauth_signature|x-amz-signature|x-amz-credential|x-amz-security-token|signature)"
                r"(=\"?)[^\"&\s]+"), r"\1\2" + REDACTED),
    (re.compile(r"(?i)\b(" + _SECRET_KEY + r")(\"?\s*[:=]\s*)(\"[^\"\n]*\"|'[^'\n]*'|[^\s,;|]+)"),
     r"\1\2" + REDACTED),
    (re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s:/@]+:)[^\s@/]+@"), r"\1" + REDACTED + "@"),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), REDACTED),
]


def redact(text: str, known: Iterable[str] = ()) -> str:
    """`text` with every secret-looking value, and every `known` secret value, replaced by [redacted]."""
    for value in sorted((k for k in known if k and len(k) >= 4), key=len, reverse=True):
        text = text.replace(value, REDACTED)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def _tail(output: str) -> str:
    """The output's last TAIL_IN_REASON characters (redacted before cutting: a cut never splits a secret
    out of its pattern), one line."""
    text = redact(output).strip()
    if len(text) > TAIL_IN_REASON:
        text = "..." + text[-TAIL_IN_REASON:]
    return text.replace("\n", " | ") or "(no output)"


def describe(result: ScriptResultView) -> str:
    """e.g. `gpuaas-fabric-check: failed, exit 1, output: link mlx5_0/1 state DOWN ...`."""
    return f"{result.text()}, output: {_tail(result.output)}"


def failed_scripts(ops: MachineOps, system_id: str, kind: str) -> str:
    """`MAAS <kind> results: <script>: failed, exit N, output: <tail>; ...` for the scripts that failed in
    the machine's current `kind` run; "" when MAAS names none (or cannot be read)."""
    try:
        failed = [describe(r) for r in ops.script_results(system_id, kind) if r.failed]
    except MaasError:
        return ""
    return f"MAAS {kind} results: {'; '.join(failed)}" if failed else ""
