"""Admin MAAS sites and site profiles."""

from __future__ import annotations

from clients.platform.models import ErrorCode as E
from clients.platform.models import (
    MaasSite,
    MaasSiteCreate,
    MaasSiteList,
    MaasSiteUpdate,
    NodeStatus,
    SiteProfile,
    SiteProfileCreate,
    SiteProfileList,
    SiteProfileUpdate,
)

from .context import Ctx, Handler, Result
from .errors import ApiError, not_found
from .state import new_id


def _site(ctx: Ctx) -> MaasSite:
    site = ctx.store.sites.get(ctx.params["site_id"])
    if site is None:
        raise not_found("site", ctx.params["site_id"])
    return site


def _profile(ctx: Ctx) -> SiteProfile:
    site = _site(ctx)
    profile = ctx.store.profiles.get(ctx.params["profile_id"])
    if profile is None or profile.site_id != site.site_id:
        raise not_found("profile", ctx.params["profile_id"])
    return profile


def list_sites(ctx: Ctx) -> Result:
    name = ctx.query.get("name")
    return Result(200, MaasSiteList(items=[s for s in ctx.store.sites.values() if name in (None, s.name)]))


def create_site(ctx: Ctx) -> Result:
    req: MaasSiteCreate = ctx.body
    clash = next((s for s in ctx.store.sites.values() if s.name == req.name), None)
    if clash:
        raise ApiError(
            409,
            E.SITE_NAME_CONFLICT,
            f"a site named '{req.name}' exists; read or update it instead",
            {"site_id": clash.site_id, "name": req.name},
        )
    now = ctx.store.clock.now()
    site = MaasSite(site_id=new_id("site"), revision=1, created_at=now, updated_at=now, **req.model_dump())
    ctx.store.sites[site.site_id] = site
    return Result(201, site, target=site.site_id)


def get_site(ctx: Ctx) -> Result:
    return Result(200, _site(ctx))


def update_site(ctx: Ctx) -> Result:
    req: MaasSiteUpdate = ctx.body
    site = _site(ctx)
    site = site.model_copy(update={**dict(req), "revision": site.revision + 1, "updated_at": ctx.store.clock.now()})
    ctx.store.sites[site.site_id] = site
    return Result(200, site, target=site.site_id)


def delete_site(ctx: Ctx) -> Result:
    site = _site(ctx)
    profiles = [p.profile_id for p in ctx.store.profiles.values() if p.site_id == site.site_id]
    if profiles:
        raise ApiError(409, E.SITE_IN_USE, "delete the site's profiles first", {"profile_ids": profiles})
    del ctx.store.sites[site.site_id]
    return Result(204, None, target=site.site_id)


def list_profiles(ctx: Ctx) -> Result:
    site, name = _site(ctx), ctx.query.get("name")
    items = [p for p in ctx.store.profiles.values() if p.site_id == site.site_id and name in (None, p.name)]
    return Result(200, SiteProfileList(items=items))


def create_profile(ctx: Ctx) -> Result:
    req: SiteProfileCreate = ctx.body
    site = _site(ctx)
    clash = next((p for p in ctx.store.profiles.values() if p.site_id == site.site_id and p.name == req.name), None)
    if clash:
        raise ApiError(
            409,
            E.PROFILE_NAME_CONFLICT,
            f"site '{site.name}' already has a profile '{req.name}'",
            {"profile_id": clash.profile_id, "name": req.name},
        )
    now = ctx.store.clock.now()
    profile = SiteProfile(
        profile_id=new_id("profile"),
        site_id=site.site_id,
        name=req.name,
        policy=req.policy,
        revision=1,
        created_at=now,
        updated_at=now,
    )
    ctx.store.profiles[profile.profile_id] = profile
    return Result(201, profile, target=profile.profile_id)


def get_profile(ctx: Ctx) -> Result:
    return Result(200, _profile(ctx))


def update_profile(ctx: Ctx) -> Result:
    req: SiteProfileUpdate = ctx.body
    profile = _profile(ctx)
    profile = profile.model_copy(
        update={"policy": req.policy, "revision": profile.revision + 1, "updated_at": ctx.store.clock.now()}
    )
    ctx.store.profiles[profile.profile_id] = profile
    return Result(200, profile, target=profile.profile_id)


def delete_profile(ctx: Ctx) -> Result:
    profile = _profile(ctx)
    users = [
        n.node_id
        for n in ctx.store.nodes.values()
        if n.profile_id == profile.profile_id and n.status is not NodeStatus.DELETED
    ]
    if users:
        raise ApiError(409, E.PROFILE_IN_USE, "remove the nodes bound to this profile first", {"node_ids": users})
    del ctx.store.profiles[profile.profile_id]
    return Result(204, None, target=profile.profile_id)


HANDLERS: dict[str, Handler] = {
    "listMaasSites": list_sites,
    "createMaasSite": create_site,
    "getMaasSite": get_site,
    "updateMaasSite": update_site,
    "deleteMaasSite": delete_site,
    "listSiteProfiles": list_profiles,
    "createSiteProfile": create_profile,
    "getSiteProfile": get_profile,
    "updateSiteProfile": update_profile,
    "deleteSiteProfile": delete_profile,
}
