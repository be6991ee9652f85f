"""URNs and aliases, as the real engine computes them (pure functions, no engine state).

Mirrors pulumi/pulumi: ``sdk/go/common/resource/urn/urn.go`` (``New``: a child's type is its parent's
*qualified* type chain, ``a$b$c``), ``sdk/go/common/resource/alias.go`` (``CreateURN``) and
``pkg/resource/deploy/step_generator.go`` (``collapseAliasToUrn``, ``inheritedChildAlias``,
``generateAliases``; ``getOldResource`` then looks the resource up by its URN first, then by each alias
in order).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

ROOT_STACK_TYPE = "pulumi:pulumi:Stack"


@dataclass(frozen=True)
class AliasSpec:
    """One ``aliases=`` entry as the SDK sends it: a whole URN, or a spec whose empty fields default to
    the resource's own (``parent=""`` and ``no_parent=False`` mean "the resource's current parent")."""

    urn: str = ""
    name: str = ""
    type: str = ""
    stack: str = ""
    project: str = ""
    parent: str = ""
    no_parent: bool = False

    @classmethod
    def from_proto(cls, alias: Any) -> AliasSpec:
        """From a ``pulumirpc.Alias`` (``urn`` or ``spec`` one-of)."""
        if alias.WhichOneof("alias") == "urn":
            return cls(urn=alias.urn)
        spec = alias.spec
        parent_kind = spec.WhichOneof("parent")
        return cls(
            name=spec.name,
            type=spec.type,
            stack=spec.stack,
            project=spec.project,
            parent=spec.parentUrn if parent_kind == "parentUrn" else "",
            no_parent=bool(spec.noParent) if parent_kind == "noParent" else False,
        )


def qualified_type(urn: str) -> str:
    return urn.split("::")[2]


def urn_name(urn: str) -> str:
    return urn.split("::", 3)[3]


def is_root_stack(urn: str) -> bool:
    return bool(urn) and qualified_type(urn) == ROOT_STACK_TYPE


def new_urn(stack: str, project: str, parent_type: str, type_: str, name: str) -> str:
    """``urn.New``: the parent's qualified type prefixes the type, unless it is the root stack."""
    typ = f"{parent_type}${type_}" if parent_type and parent_type != ROOT_STACK_TYPE else type_
    return f"urn:pulumi:{stack}::{project}::{typ}::{name}"


def resource_urn(stack: str, project: str, parent: str, type_: str, name: str) -> str:
    """The URN of a registered resource (``deployment.generateURN``)."""
    return new_urn(stack, project, qualified_type(parent) if parent else "", type_, name)


def create_urn(name: str, type_: str, parent: str, project: str, stack: str) -> str:
    """``resource.CreateURN``: with a parent, everything before its last ``::`` plus ``$type``."""
    if not parent:
        return f"urn:pulumi:{stack}::{project}::{type_}::{name}"
    return f"{parent[: parent.rindex('::')]}${type_}::{name}"


def collapse_alias(
    alias: AliasSpec, name: str, type_: str, parent: str, stack: str, project: str, parent_aliases: dict[str, str]
) -> str:
    """``collapseAliasToUrn``. ``parent_aliases``: new URN -> the old URN it took over in this run."""
    if alias.urn:
        return alias.urn
    alias_parent = alias.parent
    if not alias_parent:
        alias_parent = parent
    else:  # a parent that was itself aliased: its old URN is where this resource used to live
        alias_parent = parent_aliases.get(alias_parent, alias_parent)
    if alias.no_parent or is_root_stack(alias_parent):
        alias_parent = ""
    return create_urn(
        alias.name or name, alias.type or type_, alias_parent, alias.project or project, alias.stack or stack
    )


def inherited_child_alias(
    child_type: str, child_name: str, parent_name: str, parent_alias: str, stack: str, project: str
) -> str:
    """``inheritedChildAlias``: a child of an aliased parent also answers to a URN under the parent's old
    one (its name re-prefixed if it started with the parent's name)."""
    alias_name = child_name
    if child_name.startswith(parent_name):
        alias_name = urn_name(parent_alias) + child_name[len(parent_name) :]
    return new_urn(stack, project, qualified_type(parent_alias), child_type, alias_name)


def generate_aliases(
    aliases: list[AliasSpec],
    name: str,
    type_: str,
    parent: str,
    stack: str,
    project: str,
    parent_aliases: dict[str, str],
) -> list[str]:
    """``generateAliases``: every URN this resource may have had, in the order they are tried."""
    out: list[str] = []

    def add(urn: str) -> None:
        if urn not in out:
            out.append(urn)

    for alias in aliases:
        add(collapse_alias(alias, name, type_, parent, stack, project, parent_aliases))
    if parent and parent in parent_aliases:
        parent_alias = parent_aliases[parent]
        add(inherited_child_alias(type_, name, urn_name(parent), parent_alias, stack, project))
        for alias in aliases:
            child = collapse_alias(alias, name, type_, parent, stack, project, parent_aliases)
            add(
                inherited_child_alias(
                    qualified_type(child).split("$")[-1],
                    urn_name(child),
                    urn_name(parent),
                    parent_alias,
                    stack,
                    project,
                )
            )
    return out
