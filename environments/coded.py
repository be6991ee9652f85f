"""The one shape of a finding or failure line, and the coded error a resource kind raises at run time.

Every layer may import this leaf: validation findings (`environments.findings`), the CI lint, stack
settings, the machines' `FailCode` and each kind's runtime catalogue all write their lines here.

A line: `[LEVEL ]CODE where: message; fix: hint` (`where` names the object: a file and a path inside
it, a site, a pool, an instance; `LEVEL`, `where` and `hint` may be empty). Tools split a line's advice
off at `; fix: `. The block form, for long lists of environment findings, puts message and fix on
lines of their own under the same head.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from enum import StrEnum
from typing import Any, TypeVar, cast

FIX = "; fix: "


def line(code: str, where: str, message: str, hint: str = "", level: str = "") -> str:
    """`[LEVEL ]CODE where: message; fix: hint`."""
    head = " ".join(p for p in (level.upper(), code, where) if p)
    text = f"{head}: {message}" if where else f"{head} {message}"
    return text + (f"{FIX}{hint}" if hint else "")


def block(code: str, where: str, message: str, hint: str = "", level: str = "") -> str:
    """The same facts over three lines: `LEVEL CODE where`, then the message and `fix: hint` indented."""
    head = " ".join(p for p in (level.upper(), code, where) if p)
    return f"{head}\n    {message}" + (f"\n    fix: {hint}" if hint else "")


class FailureCode(StrEnum):
    """Base of a kind's runtime failure catalogue. A member is `NAME = (code, meaning, fix)`; calling it
    builds the error: `raise SiteProfileFail.MAAS_KEY_REJECTED(f"site {name}", "what happened")`.
    The kind's doc lists every code with its meaning and fix (a test checks they agree)."""

    meaning: str
    fix: str

    def __new__(cls, code: str, meaning: str = "", fix: str = "") -> FailureCode:
        obj = str.__new__(cls, code)
        obj._value_ = code
        obj.meaning, obj.fix = meaning, fix
        return obj

    def __call__(self, where: str, message: str, hint: str | None = None, details: Iterable[str] = ()) -> CodedError:
        return CodedError(self, where, message, self.fix if hint is None else hint, details)


class CodedError(Exception):
    """A runtime failure an operator reads: the code, the object, what happened and what to do. Raised by
    reconcilers (never with a secret in `message`: name the Vault path, not the value)."""

    def __init__(self, code: FailureCode, where: str, message: str, hint: str, details: Iterable[str] = ()) -> None:
        """`details`: lines under the head (one per host or finding), indented. `source`: the client error it
        translates (kept for callers that branch on its kind; not chained, so the operator reads one line)."""
        self.code, self.where, self.message, self.hint = code, where, message, hint
        self.source: Exception | None = None
        super().__init__(line(code.value, where, message, hint) + "".join(f"\n  {d}" for d in details))


@contextmanager
def coded_errors(where: str, codes: Mapping[type[Exception], FailureCode]) -> Iterator[None]:
    """Client errors an operator can meet (Vault, S3, MAAS, the platform) leave a reconciler as coded errors
    of its kind, naming the object; the client's own advice (after `; fix: `) is kept as the fix. The first
    matching type wins (list a subclass before its base)."""
    try:
        yield
    except CodedError:
        raise
    except tuple(codes) as e:
        code = next(c for t, c in codes.items() if isinstance(e, t))
        message, _, hint = str(e).partition(FIX)
        err = code(where, message, hint or None)
        err.source = e
        raise err from None


F = TypeVar("F", bound=Callable[..., Any])


def raises_coded(codes: Mapping[type[Exception], FailureCode]) -> Callable[[F], F]:
    """A reconciler method whose client errors leave as coded errors naming `self.where` (see coded_errors)."""
    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            with coded_errors(self.where, codes):
                return fn(self, *args, **kwargs)
        return cast(F, method)
    return wrap
