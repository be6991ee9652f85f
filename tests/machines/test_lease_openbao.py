"""The slot lease on a real OpenBao dev server (KV v2 check-and-set through clients.vault): processes
and threads racing to take slots are never granted more than the limit at once; a holder killed
without giving back is reclaimed by expiry; a deleted document and a denied token behave as documented;
a sealed Vault is an error (MCH028's cause), never "no bound"."""

from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import SecretStr

from clients.vault import VaultCredentials, VaultReader, VaultSettings
from providers.machines.lease import LeaseTimes, LeaseUnavailable, SlotLease, lease_path
from simulators.openbao import OpenBaoDevServer, bao_binary

MOUNT = "gpuaas"
PATH = lease_path("dal1", "h200")
LIMIT = 3


@pytest.fixture(scope="module")
def bao() -> Iterator[OpenBaoDevServer]:
    with OpenBaoDevServer() as server:
        server.ensure_kv_mount(MOUNT)
        yield server


def _reader(address: str, token: str) -> VaultReader:
    return VaultReader(VaultSettings(address=address, kv_mount=MOUNT), VaultCredentials(token=SecretStr(token)))


def _race(address: str, token: str, proc: int, path: str, current: Any, peak: Any, grants: Any, lock: Any) -> None:
    """One process: 4 threads, each taking, holding and giving back slots 3 times."""
    times = LeaseTimes(ttl_s=60, cas_attempts=100, backoff_s=0.005)
    lease = SlotLease(_reader(address, token), path, f"proc{proc}@{os.getpid()}", times)
    failures: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            for r in range(3):
                sid = f"m-{proc}-{t}-{r}"
                while not lease.take(sid, LIMIT):
                    time.sleep(0.005)
                with lock:
                    current.value += 1
                    peak.value = max(peak.value, current.value)
                    grants.value += 1
                time.sleep(0.02)
                with lock:
                    current.value -= 1
                lease.give_back([sid])
        except BaseException as e:  # noqa: BLE001 - re-raised by the process below
            failures.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if failures:
        raise failures[0]


def test_processes_and_threads_racing_never_hold_more_than_the_limit(bao: OpenBaoDevServer) -> None:
    ctx = mp.get_context("spawn")
    current, peak, grants = ctx.Value("i", 0, lock=False), ctx.Value("i", 0, lock=False), ctx.Value("i", 0, lock=False)
    lock = ctx.Lock()
    path = lease_path("race", "h200")
    client = bao.client()
    client.secrets.kv.v2.update_metadata(path=path, max_versions=1000, mount_point=MOUNT)  # keep every version
    procs = [
        ctx.Process(target=_race, args=(bao.address, bao.root_token, p, path, current, peak, grants, lock))
        for p in range(3)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    assert grants.value == 36, "every take was eventually granted"
    assert peak.value <= LIMIT, f"peak holders {peak.value}, limit {LIMIT}"
    # The document's whole history: every version holds at most LIMIT, and each write added or removed
    # exactly one holder (a write that dropped another's entry, e.g. from a stale read, shows as a step of 0).
    latest = client.secrets.kv.v2.read_secret_metadata(path=path, mount_point=MOUNT)["data"]["current_version"]
    sizes = [
        len(client.secrets.kv.v2.read_secret_version(path=path, version=v, mount_point=MOUNT,
                                                     raise_on_deleted_version=True)["data"]["data"]["holders"])
        for v in range(1, latest + 1)
    ]
    assert latest == 72 and max(sizes) == LIMIT and sizes[-1] == 0, sizes
    assert all(abs(b - a) == 1 for a, b in zip([0, *sizes], sizes, strict=False)), sizes


def _take_and_die(address: str, token: str) -> None:
    lease = SlotLease(_reader(address, token), PATH, f"doomed@{os.getpid()}", LeaseTimes(ttl_s=1.5))
    assert lease.take("dead-machine", 1)
    os._exit(0)  # killed: never gives back, never renews


def test_a_killed_holder_is_reclaimed_by_expiry(bao: OpenBaoDevServer) -> None:
    ctx = mp.get_context("spawn")
    p = ctx.Process(target=_take_and_die, args=(bao.address, bao.root_token))
    p.start()
    p.join(timeout=60)
    assert p.exitcode == 0
    survivor = SlotLease(_reader(bao.address, bao.root_token), PATH, "next-run", LeaseTimes(ttl_s=60))
    assert not survivor.take("m1", 1), "the dead holder's entry has not expired yet"
    deadline = time.monotonic() + 10
    while not survivor.take("m1", 1):
        assert time.monotonic() < deadline, "the dead holder was never reclaimed"
        time.sleep(0.1)
    doc, _ = survivor.store.read_doc(PATH)
    assert list((doc or {})["holders"]) == ["m1"]
    survivor.give_back(["m1"])


def test_a_deleted_document_starts_over_and_a_denied_token_names_the_grant(bao: OpenBaoDevServer) -> None:
    reader = _reader(bao.address, bao.root_token)
    lease = SlotLease(reader, lease_path("del", "h200"), "a")
    assert lease.take("m1", 1)
    bao.client().secrets.kv.v2.delete_latest_version_of_secret(path=lease_path("del", "h200"), mount_point=MOUNT)
    doc, version = reader.read_doc(lease_path("del", "h200"))
    assert doc is None and version == 1, "deleted latest version: no document, its version to write over"
    assert lease.take("m2", 1), "cleared by hand: the slot is free"
    c = bao.client()
    c.sys.create_or_update_policy(name="lease-read", policy=f'path "{MOUNT}/data/*" {{ capabilities = ["read"] }}')
    token = c.auth.token.create(policies=["lease-read"], ttl="5m")["auth"]["client_token"]
    denied = SlotLease(_reader(bao.address, token), lease_path("del", "h200"), "b")
    with pytest.raises(LeaseUnavailable, match="permission denied.*'create', 'read' and 'update'"):
        denied.take("m3", 5)


def test_a_sealed_vault_is_an_error_not_no_bound(bao: OpenBaoDevServer) -> None:
    lease = SlotLease(_reader(bao.address, bao.root_token), lease_path("sealed", "h200"), "a")
    bao.seal()
    try:
        with pytest.raises(LeaseUnavailable, match="cannot read the slot lease.*sealed"):
            lease.take("m1", 1)
    finally:
        bao.unseal()


def test_the_documented_hand_clearing_commands_work(bao: OpenBaoDevServer) -> None:
    """docs/machines.md, "Clearing a stuck lease by hand", with the `bao` CLI (same syntax as `vault`)."""
    env = {**os.environ, "BAO_ADDR": bao.address, "BAO_TOKEN": bao.root_token, "VAULT_ADDR": bao.address}
    path = lease_path("stuck", "h200")
    stuck = SlotLease(_reader(bao.address, bao.root_token), path, "killed", LeaseTimes(ttl_s=3600))
    fresh = SlotLease(_reader(bao.address, bao.root_token), path, "next")
    assert stuck.take("m1", 1) and not fresh.take("m2", 1)
    subprocess.run([bao_binary(), "kv", "put", f"-mount={MOUNT}", path, "-"], input=b'{"holders": {}}',
                   env=env, check=True, capture_output=True)
    assert fresh.take("m2", 1), "emptied by hand: the slot is free"
    subprocess.run([bao_binary(), "kv", "metadata", "delete", f"-mount={MOUNT}", path],
                   env=env, check=True, capture_output=True)
    assert fresh.take("m3", 1), "document removed by hand: the next take starts it again"
    assert fresh.store.read_doc(path)[1] == 1
