"""Version, users, zones, fabrics, VLANs, subnets, tags and node scripts."""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any

import yaml

from . import errors
from .auth import ApiKey
from .render import fabric_json, machine_json, script_json, subnet_json, tag_json, vlan_json, zone_json
from .routes import Request, Response, RouteTable, deleted
from .state import Script, Tag

if TYPE_CHECKING:
    from .core import SimCore

SIM_VERSION = "3.4.0"
CAPABILITIES = ["networks-management", "static-ipaddresses", "ipv6-deployment-ubuntu", "devices-management",
                "storage-deployment-ubuntu", "network-deployment-ubuntu", "bridging-interface-ubuntu",
                "bridging-automatic-ubuntu", "authenticate-api"]
# link mode -> MAAS IPADDRESS_TYPE (value, name) of the address it holds
ALLOC_TYPES = {"auto": (0, "Automatic"), "static": (1, "Sticky"), "dhcp": (5, "DHCP")}
SCRIPT_TYPES = {"commissioning": 0, "0": 0, "testing": 2, "test": 2, "2": 2, "release": 3, "3": 3}


def register(routes: RouteTable, core: SimCore) -> None:
    # size: one closure per MAAS handler/op over the core: the route table reads in one place
    store = core.store
    version = routes.handler("VersionHandler", "version/", anon=True, doc="Information about this MAAS instance.")
    users = routes.handler("UsersHandler", "users/", doc="Manage the user accounts of this MAAS.")
    account = routes.handler("AccountHandler", "account/", doc="Manage the current logged-in user.")
    zones = routes.handler("ZonesHandler", "zones/", doc="Manage physical zones.")
    zone = routes.handler("ZoneHandler", "zones/{name}/", doc="Manage a physical zone.")
    fabrics = routes.handler("FabricsHandler", "fabrics/", doc="Manage fabrics.")
    fabric = routes.handler("FabricHandler", "fabrics/{id}/", doc="Manage fabric.")
    vlans = routes.handler("VlansHandler", "fabrics/{fabric_id}/vlans/", doc="Manage VLANs on a fabric.")
    vlan = routes.handler("VlanHandler", "fabrics/{fabric_id}/vlans/{vid}/", doc="Manage a VLAN on a fabric.")
    subnets = routes.handler("SubnetsHandler", "subnets/", doc="Manage subnets.")
    subnet = routes.handler("SubnetHandler", "subnets/{id}/", doc="Manage a subnet.")
    tags = routes.handler("TagsHandler", "tags/", doc="Manage all tags known to MAAS.")
    tag = routes.handler("TagHandler", "tags/{name}/", doc="Manage a Tag object.")
    scripts = routes.handler("NodeScriptsHandler", "scripts/", doc="Manage custom scripts.")
    script = routes.handler("NodeScriptHandler", "scripts/{name}", doc="Manage or view a custom script.")

    @version.action("read", "GET")
    def read_version(req: Request) -> Any:
        """Version and capabilities of this MAAS instance."""
        return {"capabilities": CAPABILITIES, "version": SIM_VERSION, "subversion": "maas-simulator"}

    @users.action("whoami", "GET", "whoami")
    def whoami(req: Request) -> Any:
        """The logged-in user."""
        return {"username": req.user, "email": f"{req.user}@example.com", "is_superuser": True,
                "is_local": True, "resource_uri": f"/MAAS/api/2.0/users/{req.user}/"}

    @account.action("create_authorisation_token", "POST", "create_authorisation_token")
    def create_authorisation_token(req: Request) -> Any:
        """A new API key (OAuth consumer and token) of the logged-in user: how an operator rotates a key."""
        assert req.user is not None
        key = ApiKey.generate(req.user)
        key = dataclasses.replace(key, name=req.get("name") or key.name)
        core.keys.add(key)
        return {"token_key": key.token_key, "token_secret": key.token_secret, "consumer_key": key.consumer_key,
                "name": key.name}

    @account.action("delete_authorisation_token", "POST", "delete_authorisation_token")
    def delete_authorisation_token(req: Request) -> Any:
        """Delete one of the logged-in user's API keys by its token key (refused at once afterwards)."""
        assert req.user is not None
        token_key = req.get("token_key")
        if not token_key:
            raise errors.ApiError(400, "No provided token_key!")
        if not core.keys.remove(req.user, token_key):
            raise errors.not_found("Token")
        return deleted()

    @account.action("list_authorisation_tokens", "GET", "list_authorisation_tokens")
    def list_authorisation_tokens(req: Request) -> Any:
        """The logged-in user's API keys, each as name and whole key (MAAS shows them to their owner)."""
        assert req.user is not None
        return [{"name": k.name, "token": k.text} for k in core.keys.of_user(req.user)]

    @zones.action("read", "GET")
    def list_zones(req: Request) -> Any:
        """List zones (sites)."""
        with store.lock:
            return [zone_json(z) for z in store.zones.values()]

    @zone.action("read", "GET")
    def read_zone(req: Request) -> Any:
        """Read a zone."""
        with store.lock:
            z = store.zones.get(req.params["name"])
            if z is None:
                raise errors.not_found("Zone")
            return zone_json(z)

    @fabrics.action("read", "GET")
    def list_fabrics(req: Request) -> Any:
        """List fabrics."""
        with store.lock:
            return [fabric_json(store, f) for f in store.fabrics]

    def fabric_id(text: str) -> int:
        fid = int(text) if text.isdigit() else None
        if fid is None or fid not in store.fabrics:
            raise errors.not_found("Fabric")
        return fid

    @fabric.action("read", "GET")
    def read_fabric(req: Request) -> Any:
        """Read a fabric."""
        with store.lock:
            return fabric_json(store, fabric_id(req.params["id"]))

    @vlans.action("read", "GET")
    def list_vlans(req: Request) -> Any:
        """List the VLANs of a fabric."""
        with store.lock:
            fid = fabric_id(req.params["fabric_id"])
            return [vlan_json(store, v) for v in store.vlans.values() if v.fabric_id == fid]

    @vlan.action("read", "GET")
    def read_vlan(req: Request) -> Any:
        """Read a VLAN by fabric and VID."""
        with store.lock:
            fid = fabric_id(req.params["fabric_id"])
            vid = req.params["vid"]
            v = store.vlan_by(fid, int(vid)) if vid.isdigit() else None
            if v is None:
                raise errors.not_found("VLAN")
            return vlan_json(store, v)

    @subnets.action("read", "GET")
    def list_subnets(req: Request) -> Any:
        """List subnets."""
        with store.lock:
            return [subnet_json(store, s) for s in store.subnets.values()]

    @subnet.action("read", "GET")
    def read_subnet(req: Request) -> Any:
        """Read a subnet by id (or cidr:/name: specifier)."""
        from .handlers_nodes import resolve_subnet

        with store.lock:
            s = resolve_subnet(store, req.params["id"])
            if s is None:
                raise errors.not_found("Subnet")
            return subnet_json(store, s)

    @subnet.action("ip_addresses", "GET", "ip_addresses")
    def subnet_ip_addresses(req: Request) -> Any:
        """Summary of IP addresses assigned to this subnet (MAAS: `render_json_for_related_ips`): each with
        `alloc_type` (0 AUTO, 1 STICKY: a static link, 5 DHCP) and, with `with_summary` (default), the
        node it is on (`node_summary`: system_id, hostname, fqdn, `via` the interface)."""
        from .handlers_nodes import resolve_subnet

        summary = str(req.get("with_summary") or req.get("with_node_summary") or "1").lower() not in ("0", "false")
        with store.lock:
            s = resolve_subnet(store, req.params["id"])
            if s is None:
                raise errors.not_found("Subnet")
            out = []
            for ip, m, via, lk in store.addresses.on_subnet(s):
                alloc = ALLOC_TYPES.get(lk.mode.value, (0, "Automatic"))
                row: dict[str, Any] = {"ip": ip, "alloc_type": alloc[0], "alloc_type_name": alloc[1],
                                       "created": "2026-01-01T00:00:00.000", "updated": "2026-01-01T00:00:00.000"}
                if summary:
                    row["node_summary"] = {"system_id": m.system_id, "node_type": 0, "hostname": m.hostname,
                                           "fqdn": f"{m.hostname}.maas", "is_container": False, "via": via}
                out.append(row)
            return out

    # --- tags -----------------------------------------------------------------------------
    def get_tag(req: Request) -> Tag:
        t = store.tags.get(req.params["name"])
        if t is None:
            raise errors.not_found("Tag")
        return t

    @tags.action("read", "GET")
    def list_tags(req: Request) -> Any:
        """List tags."""
        with store.lock:
            return [tag_json(t) for t in store.tags.values()]

    @tags.action("create", "POST")
    def create_tag(req: Request) -> Any:
        """Create a tag (name, comment, definition, kernel_opts)."""
        name = req.get("name")
        if not name:
            raise errors.field_error("name", "This field is required.")
        with store.lock:
            if name in store.tags:
                raise errors.field_error("name", "Tag with this Name already exists.")
            t = Tag(name, req.get("comment") or "", req.get("definition") or "", req.get("kernel_opts") or "")
            store.tags[name] = t
            return tag_json(t)

    @tag.action("read", "GET")
    def read_tag(req: Request) -> Any:
        """Read a tag."""
        with store.lock:
            return tag_json(get_tag(req))

    @tag.action("update", "PUT")
    def update_tag(req: Request) -> Any:
        """Update a tag's comment, definition or kernel_opts."""
        with store.lock:
            t = get_tag(req)
            for name in ("comment", "definition", "kernel_opts"):
                value = req.get(name)
                if value is not None:
                    setattr(t, name, value)
            return tag_json(t)

    @tag.action("delete", "DELETE")
    def delete_tag(req: Request) -> Any:
        """Delete a tag (and remove it from machines)."""
        with store.lock:
            t = get_tag(req)
            del store.tags[t.name]
            for m in store.machines.values():
                if t.name in m.tags:
                    m.tags.remove(t.name)
        return deleted()

    @tag.action("update_nodes", "POST", "update_nodes")
    def update_nodes(req: Request) -> Any:
        """Add (`add`) or remove (`remove`) system_ids to/from a tag."""
        with store.lock:
            t = get_tag(req)
            if t.definition:
                raise errors.ApiError(409, "Cannot update nodes for a tag with a definition; the definition "
                                      "decides which nodes have it.")
            added = removed = 0
            for sid in req.get_list("add"):
                m = store.machines.get(sid)
                if m is not None and t.name not in m.tags:
                    m.tags.append(t.name)
                    added += 1
            for sid in req.get_list("remove"):
                m = store.machines.get(sid)
                if m is not None and t.name in m.tags:
                    m.tags.remove(t.name)
                    removed += 1
            return {"added": added, "removed": removed}

    @tag.action("machines", "GET", "machines")
    def tag_machines(req: Request) -> Any:
        """The machines carrying this tag."""
        with store.lock:
            t = get_tag(req)
            return [machine_json(store, m) for m in store.machines.values() if t.name in m.tags]

    # --- node scripts ---------------------------------------------------------------------
    @scripts.action("create", "POST")
    def create_script(req: Request) -> Any:
        """Upload a script (name, type, script file; title, description, tags, timeout, destructive)."""
        name = req.get("name")
        body = req.get_bytes("script")
        if not name:
            raise errors.field_error("name", "This field is required.")
        if not body:
            raise errors.field_error("script", "This field is required.")
        stype_text = (req.get("type") or req.get("script_type") or "testing").lower()
        if stype_text not in SCRIPT_TYPES:
            raise errors.field_error(
                "type", f"Script type must be commissioning, testing or release, not {stype_text}.")
        with store.lock:
            if name in store.scripts:
                raise errors.field_error("name", "Script with this Name already exists.")
            tags_text = req.get("tags") or ""
            timeout = req.get("timeout")
            s = Script(id=store.next_id("script", 100), name=name, script_type=SCRIPT_TYPES[stype_text],
                       script=body, title=req.get("title") or "", description=req.get("description") or "",
                       tags=[t.strip() for t in tags_text.split(",") if t.strip()],
                       timeout=_seconds(timeout) if timeout is not None else embedded_timeout(body),
                       destructive=req.get_bool("destructive"))
            store.scripts[name] = s
            return script_json(s)

    @scripts.action("read", "GET")
    def list_scripts(req: Request) -> Any:
        """List scripts; filter with type=commissioning|testing|release."""
        wanted = req.get("type")
        if wanted is not None and wanted.lower() not in SCRIPT_TYPES:
            raise errors.validation(f"Unknown script type: {wanted}")
        include = req.get_bool("include_script")
        with store.lock:
            return [script_json(s, include) for s in store.scripts.values()
                    if wanted is None or s.script_type == SCRIPT_TYPES[wanted.lower()]]

    def get_script(req: Request) -> Script:
        key = req.params["name"]
        s = store.scripts.get(key) or next((x for x in store.scripts.values() if str(x.id) == key), None)
        if s is None:
            raise errors.not_found("Script")
        return s

    @script.action("read", "GET")
    def read_script(req: Request) -> Any:
        """Read a script's metadata (include_script=true adds its body, base64)."""
        with store.lock:
            return script_json(get_script(req), req.get_bool("include_script"))

    @script.action("download", "GET", "download")
    def download_script(req: Request) -> Any:
        """The script body."""
        with store.lock:
            return Response(200, get_script(req).script, "application/binary")

    @script.action("delete", "DELETE")
    def delete_script(req: Request) -> Any:
        """Delete a custom script."""
        with store.lock:
            s = get_script(req)
            if s.default:
                raise errors.forbidden("Unable to delete default script.")
            del store.scripts[s.name]
        return deleted()


_EMBEDDED = re.compile(r"^# --- Start MAAS 1\.0 script metadata ---$(.*?)^# --- End MAAS 1\.0 script metadata ---$",
                       re.M | re.S)


def _seconds(value: object) -> int:
    """A script timeout: seconds, or MAAS's duration text ("00:05:00"); 0 (none) when unreadable."""
    if isinstance(value, int):
        return max(value, 0)
    text = str(value).strip()
    if text.isdigit():
        return int(text)
    parts = text.split(":")
    if len(parts) == 3 and all(p.isdigit() for p in parts):
        return int(parts[0]) * 3600 + int(parts[1]) * 60 + int(parts[2])
    return 0


def embedded_timeout(body: bytes) -> int:
    """The `timeout` of a script's embedded metadata block (`# --- Start MAAS 1.0 script metadata ---`),
    which MAAS applies when the upload names none (maasserver/forms/script.py); 0 when absent."""
    found = _EMBEDDED.search(body.decode(errors="replace"))
    if found is None:
        return 0
    lines = [ln[1:] for ln in found.group(1).strip("\n").splitlines() if ln.startswith("#")]
    try:
        meta = yaml.safe_load("\n".join(lines)) or {}
    except yaml.YAMLError:
        return 0
    return _seconds(meta.get("timeout", 0)) if isinstance(meta, dict) else 0
