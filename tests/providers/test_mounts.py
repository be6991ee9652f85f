"""WEKA POSIX mount units (seed 000 §2): the real wekafs unit, and the lab's disclosed stand-in drop-in."""

from __future__ import annotations

from environments import load_environment
from providers.hosts.mounts import STAND_IN_NOTE, render_mount, unit_name


def test_dev_declares_a_wekafs_training_mount_rendered_as_a_real_unit() -> None:
    env = load_environment("dev")
    (mnt,) = env.storage_mounts
    fs = next(f for f in env.filesystems if f.name == mnt.filesystem)
    out = render_mount(fs_name=fs.fs_name, backends=list(fs.backends), mount_point=mnt.mount_point,
                       options=list(mnt.options), read_only=mnt.read_only, purpose=mnt.purpose.value,
                       stand_in=fs.lab_stand_in.value if fs.lab_stand_in else None)
    assert out.name == "mnt-weka-training.mount"
    assert "What=weka-lab-1.dev.gpuaas.internal/training\nWhere=/mnt/weka/training\nType=wekafs\n" in out.unit
    assert "Options=_netdev,x-systemd.requires=weka-agent.service,x-systemd.after=network-online.target" in out.unit
    assert out.drop_in is not None and STAND_IN_NOTE in out.drop_in and "Type=tmpfs" in out.drop_in


def test_unit_names_and_options() -> None:
    assert unit_name("/mnt/weka-data/") == "mnt-weka\\x2ddata.mount"
    ro = render_mount(fs_name="datasets", backends=["w1", "w2"], mount_point="/data", options=["readcache"],
                      read_only=True, purpose="data", stand_in=None)
    assert "What=w1,w2/datasets" in ro.unit and ro.unit.count(",ro,readcache") == 1 and ro.drop_in is None
