"""Run the platform simulator standalone: `python -m simulators.platform [--port N] [--time-scale S]`.

Prints its URL, the /_sim/ admin token and a bootstrapped tenant/project with a token per role,
as one JSON document on stdout, then serves until interrupted.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading

from .server import PlatformSimulator


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulators.platform", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--time-scale", type=float, default=1.0, help="real seconds per simulated second")
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with PlatformSimulator(time_scale=args.time_scale, host=args.host, port=args.port) as sim:
        creds = sim.bootstrap()
        # Deliberately printed: this is a throwaway local simulator and the caller needs them.
        print(json.dumps({"url": sim.url, "sim_admin_token": sim.admin_token, **creds.model_dump()}), flush=True)
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
