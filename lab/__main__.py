"""`python -m lab {preflight,build,up,clean}` — the lab from the command line.

`up` boots the hosts, prints their addresses and the SSH key, and holds until Ctrl-C / SIGTERM,
then tears everything down.
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from .image import ensure_image
from .lab import LAB_DIR, Lab, clean_stale, describe, preflight
from .standins import build_standins

DEV_HOSTS = ["dev-control-1", "dev-lab-1", "dev-gpu-1"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m lab")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("preflight", help="say whether this machine can run the lab, and why not")
    sub.add_parser("build", help="build (or reuse) the cached host image")
    up = sub.add_parser("up", help="boot the hosts and hold until interrupted")
    up.add_argument("hosts", nargs="*", default=DEV_HOSTS)
    sub.add_parser("clean", help="undo runs left behind by dead processes")
    sub.add_parser("pins", help="build the stand-ins in a temporary directory and print their sha256 pins")
    args = ap.parse_args(argv)
    if args.cmd in ("preflight", "build", "up"):
        reason = preflight()
        if reason:
            print(f"LAB UNAVAILABLE: {reason}", file=sys.stderr)
            return 2
    if args.cmd == "preflight":
        print("lab: this machine can run the lab")
    elif args.cmd == "build":
        t0 = time.monotonic()
        img = ensure_image(LAB_DIR)
        print(f"lab image: {img.tree} ({'built' if img.built_now else 'cached'}, {time.monotonic() - t0:.1f}s)")
    elif args.cmd == "up":
        stop = threading.Event()
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, lambda *_: stop.set())
        with Lab(args.hosts) as info:
            print(describe(info), flush=True)
            stop.wait()
    elif args.cmd == "pins":
        with tempfile.TemporaryDirectory() as d:
            for key, art in sorted(build_standins(Path(d)).items()):
                print(f"{key}: {art.name} sha256 {art.sha256}")
    elif args.cmd == "clean":
        print("lab: cleaned", clean_stale() or "nothing")
    return 0


if __name__ == "__main__":
    sys.exit(main())
