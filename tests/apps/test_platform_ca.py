"""AppInstance behind a platform with a private CA (`ca_bundles.platform`): the reconciler's platform client
trusts the CA the spec names, and without it (or with another CA) stops with "certificate not trusted" and
the fix, before anything is created. The component passes the environment's bundle through."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.apps import instance_args
from components.settings import StackSettings
from environments import load_environment
from environments.coded import CodedError
from providers.apps.failures import AppFail
from simulators.tls import PrivateCa, TlsFront

from .conftest import Lab


def test_the_platform_client_trusts_the_named_ca_and_refuses_without_it(lab: Lab, tmp_path: Path) -> None:
    (tmp_path / "ca").mkdir(), (tmp_path / "other").mkdir()
    ca, other = PrivateCa(tmp_path / "ca"), PrivateCa(tmp_path / "other", common_name="some other CA")
    cert, key = ca.issue("127.0.0.1")
    with TlsFront(lab.sim.url, cert, key) as front:
        for bundle in (None, other.bundle):
            with pytest.raises(CodedError) as e:
                lab.rec(lab.spec(platform_url=front.url, platform_ca_bundle=str(bundle) if bundle else None)).converge()
            assert e.value.code is AppFail.PLATFORM and "certificate not trusted" in str(e.value)
            assert "ca_bundles.platform" in str(e.value)
        assert lab.sim.store.instances == {}  # refused before anything was created
        out = lab.rec(lab.spec(platform_url=front.url, platform_ca_bundle=str(ca.bundle))).converge()
    assert out.status.value == "ready"


def test_the_component_passes_the_environments_platform_ca(tmp_path: Path) -> None:
    env = load_environment("dev")
    env = env.model_copy(update={"ca_bundles": env.ca_bundles.model_copy(update={"platform": "certs/platform-ca.pem"})})
    args = instance_args(env, StackSettings(stack="dev", environment="dev"), env.app_instances[0])
    assert args.platform_ca_bundle == "certs/platform-ca.pem"
    plain = instance_args(load_environment("dev"), StackSettings(stack="dev", environment="dev"),
                          load_environment("dev").app_instances[0])
    assert plain.platform_ca_bundle is None
