"""A lab run's on-disk record (lab/lab.py `_Run`): other sessions' clean-ups (`clean_stale`, the node lab's
`detach_stale_loops`) read it while its owner rewrites it, so a record is written whole, and only a record
whose owner is gone is a run to undo. No lab needed: these are files and process ids."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from lab.lab import _Run, stale_run
from tests.fixtures.processes import dead_pid


def test_only_a_record_whose_owner_is_gone_is_a_run_to_undo(tmp_path: Path) -> None:
    alive, gone, half, none = (tmp_path / n for n in ("alive", "gone", "half", "none"))
    for d in (alive, gone, half, none):
        d.mkdir()
    _Run(owner_pid=os.getpid()).save(alive)
    _Run(owner_pid=dead_pid(), merged=[gone / "h-0/merged"]).save(gone)
    (half / "state.json").write_text('{"owner_pid": 1')  # a record cut short: not ours to judge

    assert stale_run(alive) is None
    run = stale_run(gone)
    assert run is not None and run.merged == [gone / "h-0/merged"]
    assert stale_run(half) is None and stale_run(none) is None
    assert sorted(p.name for p in alive.iterdir()) == ["state.json"], "no temporary file left beside it"


def test_a_record_rewritten_while_read_always_reads_whole(tmp_path: Path) -> None:
    """The owner saves its record at each boot; another session reads it at any moment. Written in place
    (truncate, then write) a reader could see it empty or cut short, and the node lab's clean-up took such a
    record for a dead run and detached the live run's disks."""
    run = _Run(owner_pid=os.getpid())
    run.save(tmp_path)
    done, torn = threading.Event(), []

    def owner() -> None:
        for i in range(2000):  # records of two lengths, so a torn one shows
            run.merged = [tmp_path / f"h-{j}/merged" for j in range(50 * (i % 2))]
            run.save(tmp_path)
        done.set()

    writer = threading.Thread(target=owner)
    writer.start()
    while not done.is_set():
        text = (tmp_path / "state.json").read_text()
        try:
            json.loads(text)
        except ValueError:
            torn.append(text[:80])
        assert stale_run(tmp_path) is None
    writer.join()
    assert not torn, f"{len(torn)} reads saw a record cut short: {torn[:3]}"
