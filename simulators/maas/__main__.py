"""`python -m simulators.maas --port 0 --inventory FILE`: run the simulator until interrupted.

Prints the MAAS URL and the API key (two lines, `MAAS_URL=...` and `MAAS_API_KEY=...`) so a
script can read them; the key is for this throwaway local server only.

`--enroll-backend nspawn` (alias `--machine-backend`) boots a real systemd-nspawn node for each deploy
(root, systemd-nspawn; lab/node.py) and learns Deployed from the node's cloud-init; the simulator then
listens on the lab network's gateway (printed as `LAB_GATEWAY=...`), where the platform and the
artifact store the user_data names must listen too.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from pathlib import Path

from .enroll import EnrollBackend
from .faults import SimFaults
from .inventory import InventoryError, SimInventory, demo_inventory
from .simulator import MaasSimulator


def main(argv: list[str] | None = None) -> int:
    # size: the CLI's flags in --help order, then one start-and-serve sequence per backend
    p = argparse.ArgumentParser(prog="python -m simulators.maas", description=__doc__.splitlines()[0])
    p.add_argument("--host", help="address to bind (default 127.0.0.1; with nspawn, the lab gateway)")
    p.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    p.add_argument("--inventory", type=Path, help="YAML/JSON SimInventory (default: a one-site demo)")
    p.add_argument("--time-scale", type=float, default=0.01,
                   help="multiplier on real-world phase durations (default 0.01: a deploy takes 9 s)")
    p.add_argument("--faults", type=Path, help="JSON/YAML SimFaults to start with")
    p.add_argument("--platform-url", help="enrollment hook target (POST <url>/api/v1/node-bootstrap/enroll)")
    p.add_argument("--enroll-backend", "--machine-backend", dest="enroll_backend",
                   choices=[b.value for b in EnrollBackend], default=EnrollBackend.FAST.value,
                   help="fast: the simulator enrolls deployed nodes itself; node: the node's own launcher does; "
                        "nspawn: a real nspawn node boots for each deploy and its cloud-init reports Deployed")
    p.add_argument("--api-key", help="use this consumer:token:secret instead of a generated one")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(message)s")
    faults = None
    if args.faults:
        import yaml

        try:
            faults = SimFaults.model_validate(yaml.safe_load(args.faults.read_text()) or {})
        except Exception as exc:  # noqa: BLE001 - report any bad fault file the same way
            print(f"{args.faults}: invalid fault configuration: {exc}", file=sys.stderr)
            return 2
    backend = EnrollBackend(args.enroll_backend)
    try:
        inventory = SimInventory.load(args.inventory) if args.inventory else demo_inventory()
    except InventoryError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    lab, nodes = None, None
    if backend is EnrollBackend.NSPAWN:
        from lab import preflight
        from lab.node import NodeLab

        from .nspawn import NspawnNodes

        why = preflight()
        if why:
            print(f"--enroll-backend nspawn cannot run here: {why}", file=sys.stderr)
            return 2
        lab = NodeLab([m.hostname for m in inventory.machines if m.hostname])
        lab.start()
        nodes = NspawnNodes(lab)
        print(f"LAB_GATEWAY={lab.gateway}", flush=True)
    try:
        sim = MaasSimulator(inventory, time_scale=args.time_scale, faults=faults, host=args.host,
                            port=args.port, platform_url=args.platform_url, api_key=args.api_key,
                            enroll_backend=backend, nodes=nodes)
        sim.start()
    except BaseException:
        if lab is not None:
            lab.stop()
        raise
    print(f"MAAS_URL={sim.url}", flush=True)
    print(f"MAAS_API_KEY={sim.api_key}", flush=True)
    print(f"# admin: {sim.root_url}/_sim/stats  machines: {len(sim.core.store.machines)}  "
          f"time_scale: {args.time_scale}", flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    sim.stop()  # halts the nodes
    if lab is not None:
        lab.stop()
    print(json.dumps({"stopped": True}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
