"""KindProvider: what every kind's adapter does the same way, written once (as Pulumi's own
`ResourceProvider` carries defaults). An adapter states its descriptor, its spec model, how it builds
its reconciler and what truly differs, by overriding the hooks below.

- `configure`: the Vault credentials from the stack config (`credentials`; never written to state).
- `check`: unknown inputs (preview) are accepted as they are and validated again at up; otherwise the
  kind's spec model validates `check_inputs(news)`, its errors become coded CheckFailures
  (`spec_failures`, source `source(news)`), then `check_spec` adds the kind's own rules.
- `diff`: the descriptor compares `comparable(olds)` with `comparable(news)` over `inputs`; a change
  the descriptor sees or `drifted` (what the last refresh found) is a change.
- `create` / `update`: `converge(props, olds)` (olds: None at create), the id from `id_of`.
- `read`: `observe(id_, props)`; None means gone (the next up creates it again).
- outputs: the kept inputs (`kept_inputs`; None: every input) plus the reconciler's result.

The concrete Provider classes are pickled into state by reference (module path + class name), and
pickled as constructed: nothing may be set on the instance outside `configure`, which runs in the
provider process (a field set in `__init__` would change every resource's `__provider` input).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Generic, TypeVar

from pulumi.dynamic import (
    CheckResult,
    ConfigureRequest,
    CreateResult,
    DiffResult,
    ReadResult,
    ResourceProvider,
    UpdateResult,
)
from pydantic import BaseModel, ValidationError

from clients.vault import VaultCredentials, credentials_from_config
from providers.common import has_unknown, plain, spec_failures
from providers.kind import InputDiff, KindDescriptor

Result = BaseModel | Mapping[str, Any]
"""What a reconciler's verb returns, as the outputs record it (a model is dumped as JSON)."""
S = TypeVar("S", bound=BaseModel)


class KindProvider(ResourceProvider, Generic[S]):
    """The shared part of the seven adapters, over the kind's spec model `S`; see the module doc for the hooks."""

    serialize_as_secret_always = False  # pickled by reference: the state holds a class name, nothing secret

    descriptor: ClassVar[KindDescriptor]
    spec_model: type[S]
    inputs: ClassVar[tuple[str, ...]]
    """The input keys `diff` compares (the descriptor classifies their paths)."""
    kept_inputs: ClassVar[tuple[str, ...] | None] = None
    """The input keys the outputs keep; None: every input (plain values, no `__` keys)."""

    # --- configure ---------------------------------------------------------------------------------
    def configure(self, req: ConfigureRequest) -> None:
        self._credentials = credentials_from_config(req.config)

    @property
    def credentials(self) -> VaultCredentials | None:
        """The configure()d Vault credentials (None when called without configure, as unit tests do)."""
        return getattr(self, "_credentials", None)

    def spec_of(self, props: Mapping[str, Any]) -> S:
        """The kind's spec out of inputs or state (state also holds the outputs). A model refusing unknown
        fields is given only its own; one ignoring them sees every key (its validators may read keys
        older state wrote)."""
        raw = plain(props)
        if self.spec_model.model_config.get("extra") == "forbid":
            raw = {k: raw[k] for k in self.spec_model.model_fields if k in raw}
        return self.spec_model.model_validate(raw)

    # --- check -------------------------------------------------------------------------------------
    def check(self, olds: dict[str, Any], news: dict[str, Any]) -> CheckResult:
        raw = self.check_inputs(news)
        if raw is None:
            return CheckResult(news, [])
        try:
            spec = self.spec_model.model_validate(raw)
        except ValidationError as e:
            return CheckResult(news, spec_failures(e, self.source(news)))
        return self.check_spec(olds, news, spec)

    def check_inputs(self, news: dict[str, Any]) -> dict[str, Any] | None:
        """What the spec model validates; None while an input is unknown (a preview; validated again at
        up). `__provider` does not count: it is this class, never unknown."""
        if has_unknown({k: v for k, v in news.items() if not str(k).startswith("__")}):
            return None
        return plain(news)

    def source(self, news: dict[str, Any]) -> str:
        """Where a check failure points: `<document>[<object>]`."""
        return self.descriptor.name

    def check_spec(self, olds: dict[str, Any], news: dict[str, Any], spec: S) -> CheckResult:
        """The kind's own rules over a valid spec; may return checked inputs (values planned at check)."""
        return CheckResult(news, [])

    # --- diff --------------------------------------------------------------------------------------
    def diff(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        d = self.input_diff(olds, news)
        return DiffResult(changes=d.changed or self.drifted(olds, news), replaces=list(d.replaces),
                          delete_before_replace=self.descriptor.delete_before_replace)

    def input_diff(self, olds: Mapping[str, Any], news: Mapping[str, Any]) -> InputDiff:
        """The descriptor's reading of the changed inputs."""
        return self.descriptor.diff(self.comparable(olds), self.comparable(news), inputs=self.inputs)

    def comparable(self, props: Mapping[str, Any]) -> Mapping[str, Any]:
        """Inputs as `diff` compares them (an adapter normalises spellings older state wrote)."""
        return props

    def drifted(self, olds: dict[str, Any], news: dict[str, Any]) -> bool:
        """Whether the last observation (create, update or refresh) left something for up to do."""
        return False

    # --- create / update / read --------------------------------------------------------------------
    def create(self, props: dict[str, Any]) -> CreateResult:
        result = self.converge(props, None)
        return CreateResult(self.id_of(props, result), self.outputs(props, result))

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(self.outputs(news, self.converge(news, olds)))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        result = self.observe(id_, props)
        if result is None:  # gone outside the stack: the next up creates it again
            return ReadResult("", {})
        return ReadResult(id_, self.outputs(props, result))

    def converge(self, props: dict[str, Any], olds: dict[str, Any] | None) -> Result:
        """Bring the object to `props` (olds: the state an update starts from; None at create)."""
        raise NotImplementedError(f"{type(self).__name__}: converge")

    def id_of(self, props: dict[str, Any], result: Result) -> str:
        """The resource id of a created object."""
        raise NotImplementedError(f"{type(self).__name__}: id_of")

    def observe(self, id_: str, props: dict[str, Any]) -> Result | None:
        """The object as it is (refresh), or None when it is gone."""
        raise NotImplementedError(f"{type(self).__name__}: observe")

    def outputs(self, props: Mapping[str, Any], result: Result) -> dict[str, Any]:
        """The kept inputs plus the reconciler's result (its keys win)."""
        p = plain(props)
        kept = p if self.kept_inputs is None else {k: p[k] for k in self.kept_inputs if k in p}
        return {**kept, **(result.model_dump(mode="json") if isinstance(result, BaseModel) else result)}
