"""The fixture program: declares the widgets described by the ``engine-fixture:spec`` config (JSON).

Each spec item: ``{"name", "props", "secret": [keys], "refs": {prop: other}, "parent": group,
"opts": {protect, retain_on_delete, ignore_changes, additional_secret_outputs, depends_on,
delete_before_replace, aliases}}``; ``aliases`` entries are URN strings or ``{"name", "type_",
"parent"}`` dicts (``"parent": null`` = had no parent; a spec name = that resource). Items with
``"group": true`` are component resources; items with ``"read_id"`` read an existing widget (``Resource.get``).
``engine-fixture:stackrefs`` (JSON): ``[{"name", "stack", "outputs": [...]}]``, a ``pulumi.StackReference``
each, every named output exported as ``<name>:<output>``.
"""

import json

import pulumi
from fixture_provider import Group, Widget

config = pulumi.Config()
spec = json.loads(config.get("spec") or "[]")
made: dict[str, pulumi.Resource] = {}


def alias(entry: str | dict) -> str | pulumi.Alias:
    if isinstance(entry, str):
        return entry
    fields = dict(entry)
    if "parent" in fields and fields["parent"] is not None:
        fields["parent"] = made[fields["parent"]]
    return pulumi.Alias(**fields)


for item in spec:
    name = item["name"]
    opts_spec = dict(item.get("opts", {}))
    depends_on = [made[n] for n in opts_spec.pop("depends_on", [])]
    if "aliases" in opts_spec:
        opts_spec["aliases"] = [alias(a) for a in opts_spec["aliases"]]
    parent = made[item["parent"]] if item.get("parent") else None
    opts = pulumi.ResourceOptions(depends_on=depends_on, parent=parent, **opts_spec)
    if item.get("group"):
        made[name] = Group(name, opts)
        continue
    if item.get("read_id"):  # Resource.get-style read of an existing widget
        made[name] = Widget(name, {}, pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(id=item["read_id"])))
        pulumi.export(f"{name}_size", made[name].size)  # type: ignore[attr-defined]
        continue
    props = dict(item.get("props", {}))
    for key in item.get("secret", []):
        props[key] = pulumi.Output.secret(props[key])
    for key, other in item.get("refs", {}).items():
        props[key] = made[other].widget_id  # type: ignore[attr-defined]
    widget = Widget(name, props, opts)
    made[name] = widget
    pulumi.export(f"{name}_id", widget.widget_id)
    pulumi.export(f"{name}_token", widget.token)

for ref in json.loads(config.get("stackrefs") or "[]"):
    reference = pulumi.StackReference(ref["name"], stack_name=ref.get("stack"))
    for output in ref.get("outputs", []):
        pulumi.export(f"{ref['name']}:{output}", reference.get_output(output))

pulumi.export("greeting", config.get("greeting"))
