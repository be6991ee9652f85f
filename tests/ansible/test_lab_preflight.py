"""The lab tier says why it cannot run, instead of failing or skipping silently."""

from __future__ import annotations

import shutil

import pytest

from lab import lab as lab_mod


def test_preflight_names_missing_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUAAS_LAB", raising=False)
    monkeypatch.setattr(lab_mod.os, "geteuid", lambda: 1000)
    assert lab_mod.preflight() == "needs root (systemd-nspawn, network namespaces, overlay mounts)"


def test_preflight_names_missing_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUAAS_LAB", raising=False)
    monkeypatch.setattr(lab_mod.os, "geteuid", lambda: 0)
    real = shutil.which
    monkeypatch.setattr(lab_mod.shutil, "which", lambda c: None if c in ("systemd-nspawn", "debootstrap") else real(c))
    reason = lab_mod.preflight()
    assert reason is not None and "debootstrap, systemd-container" in reason and "make setup" in reason


def test_preflight_can_be_switched_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUAAS_LAB", "off")
    assert lab_mod.preflight() == "disabled by GPUAAS_LAB=off"
