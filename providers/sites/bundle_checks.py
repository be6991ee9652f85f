"""What a rendered bundle must be before it is published, checked at `check` (so at preview) with the
bundle's template file, a stable code and the problem named: BND001-005 of `failures.BundleFail` (a part
without `#cloud-config`, not YAML, not a mapping, a module the launcher does not apply; a node script without
an interpreter line), listed in docs/sites-bundles-roce.md; docs/node-bootstrap.md, "cloud-init parts".

Every key of a part is applied or refused, never dropped: `APPLIED` maps each key the cloud-init step
applies to the cloud-init module that applies it; the step template renders the same table.
"""

from __future__ import annotations

import yaml

from .failures import BundleFail

_SCRIPT_DIRS = ("steps/", "validation/", "commissioning/", "testing/")

# part key -> the cloud-init module the bundle's cloud-init step runs for it (`cloud-init single --name <module>`);
# runcmd is run by the step itself as cloud-init's scripts_user would (steps/20-cloud-init.sh)
APPLIED: dict[str, str] = {
    "write_files": "write_files",
    "packages": "package_update_upgrade_install",
    "package_update": "package_update_upgrade_install",
    "package_upgrade": "package_update_upgrade_install",
    "package_reboot_if_required": "package_update_upgrade_install",
    "users": "users_groups",
    "groups": "users_groups",
    "runcmd": "runcmd",
}
# keys people reach for whose job another field of the environment does (the hint names it)
INSTEAD: dict[str, str] = {
    "apt": "declare vendor repositories as the environment's apt_sources and name them in the profile's "
           "apt_sources (the packages step adds them, keys checked by fingerprint)",
    "ssh_authorized_keys": "declare the profile's login_user with ssh_authorized_keys (Vault references)",
    "chpasswd": "declare the profile's login_user password policy (locked, or a hash by Vault reference)",
    "password": "declare the profile's login_user password policy (locked, or a hash by Vault reference)",
    "bootcmd": "a bundle part runs after first boot, not at boot: use runcmd (or a systemd unit in write_files)",
    "mounts": "declare filesystems and storage_mounts (WEKA) or the storage layout's data_devices (/shareN)",
}


class Problem(tuple[str, str, str]):
    """(template shown as `<set>/<path>.j2`, code, what is wrong and how to fix it)."""

    __slots__ = ()

    @property
    def template(self) -> str:
        return self[0]


def problems(template_set: str, files: dict[str, bytes]) -> list[Problem]:
    out: list[Problem] = []
    for path, body in sorted(files.items()):
        shown = f"{template_set}/{path}.j2"
        text = body.decode(errors="replace")
        if path.startswith("cloud-init/") and path.endswith((".yaml", ".yml")):
            out += [Problem((shown, code, msg)) for code, msg in _cloud_config(text)]
        elif path.startswith(_SCRIPT_DIRS) and path.endswith(".sh") and not text.startswith("#!"):
            first = text.splitlines()[0][:60] if text.strip() else "(empty)"
            out.append(Problem((shown, BundleFail.NO_INTERPRETER, "renders a script without an interpreter line "
                                f"(first line: {first!r}); start it with `#!/bin/bash` (or another interpreter)")))
    return out


def _cloud_config(text: str) -> list[tuple[BundleFail, str]]:
    if not text.startswith("#cloud-config"):
        return [(BundleFail.NOT_CLOUD_CONFIG, "renders a cloud-init part that does not start with `#cloud-config` "
                 "(cloud-init would skip it); make `#cloud-config` its first line")]
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at rendered line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        return [(BundleFail.CLOUD_CONFIG_YAML, f"renders invalid YAML{at}: {problem}; fix the template (quote "
                 "values that contain `: ` or `#`)")]
    if doc is not None and not isinstance(doc, dict):
        return [(BundleFail.CLOUD_CONFIG_SHAPE, f"renders a cloud-config that is a {type(doc).__name__}, not a "
                 "mapping of modules; fix the template")]
    out = []
    for key in sorted(k for k in (doc or {}) if k not in APPLIED):
        instead = INSTEAD.get(key, f"the launcher applies only {', '.join(sorted(APPLIED))}; move what `{key}` "
                                   "does into one of them (runcmd, write_files) or into a bundle step")
        out.append((BundleFail.CLOUD_CONFIG_KEY, f"uses the cloud-init key `{key}`, which the bundle's cloud-init "
                    f"step does not apply (it would be dropped on the node); {instead}"))
    return out
