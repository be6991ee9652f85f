"""bench_scale.py's baseline: what one pass costs the real Pulumi CLI, the program's Python and a Python dynamic
provider plugin, with one resource whose provider does nothing and imports nothing of this project. The site
stack's figures sit on this floor (each `up`, `preview` and `refresh` pays it once per pass)."""

from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, Resource, ResourceProvider


class Nothing(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        return CreateResult("floor", props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        return DiffResult(changes=False)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        return ReadResult(id_, props)


class Floor(Resource):
    def __init__(self, name: str) -> None:
        super().__init__(Nothing(), name, {"size": 1})


pulumi.export("id", Floor("floor").id)
