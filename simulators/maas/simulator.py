"""`MaasSimulator`: the embeddable server (tests, the `local` stack, the demo)."""

from __future__ import annotations

import threading
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .admin import AdminClient
from .auth import ApiKey
from .core import SimCore
from .enroll import EnrollBackend
from .faults import SimFaults
from .inventory import SimInventory, demo_inventory
from .lifecycle import PhaseDurations
from .server import SimHTTPServer

if TYPE_CHECKING:
    from .nspawn import NspawnNodes


class MaasSimulator:
    """A MAAS 2.0 API over real HTTP on 127.0.0.1.

        with MaasSimulator(inventory="inv.yaml", time_scale=0.001) as sim:
            client = maas.client.connect(sim.url, apikey=sim.api_key)

    `inventory` is a SimInventory, a path to a YAML/JSON file, or None (a one-site demo
    inventory). `time_scale` multiplies every phase duration (`durations`, in real-world
    seconds); `faults` is the initial fault configuration; `platform_url` with
    `enroll_backend=EnrollBackend.FAST` (the default) has the simulator enroll each deployed node itself
    (no node runs anything); `EnrollBackend.NODE` leaves enrollment to the node's own launcher (enroll.py).
    `EnrollBackend.NSPAWN` with `nodes=NspawnNodes(lab)` boots a real node for each deploy and learns
    Deployed / Failed deployment from the node's cloud-init (nspawn.py); the server then binds the lab
    gateway unless `host` says otherwise.
    """

    def __init__(self, inventory: SimInventory | str | Path | None = None, *, time_scale: float = 1.0,
                 faults: SimFaults | dict[str, Any] | None = None, durations: PhaseDurations | None = None,
                 platform_url: str | None = None, host: str | None = None, port: int = 0,
                 api_key: str | None = None, seed: int = 0, enroll_backend: EnrollBackend = EnrollBackend.FAST,
                 nodes: NspawnNodes | None = None) -> None:
        if inventory is None:
            inv = demo_inventory()
        elif isinstance(inventory, SimInventory):
            inv = inventory
        else:
            inv = SimInventory.load(inventory)
        if isinstance(faults, dict):
            faults = SimFaults.model_validate(faults)
        self.core = SimCore(inv, time_scale=time_scale, faults=faults, durations=durations,
                            platform_url=platform_url, api_key=ApiKey.parse(api_key) if api_key else None,
                            seed=seed, enroll_backend=enroll_backend, nodes=nodes)
        self._address = (host or (nodes.gateway if nodes is not None else "127.0.0.1"), port)
        self._server: SimHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._server is not None:
            return
        self._server = SimHTTPServer(self._address, self.core)
        self.core.lifecycle.metadata_url = f"{self.root_url}/MAAS/metadata/"
        self.core.lifecycle.start()
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="maas-sim-http", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self.core.lifecycle.stop()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None

    def __enter__(self) -> MaasSimulator:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("MaasSimulator is not started; call start() first")
        return int(self._server.server_address[1])

    @property
    def root_url(self) -> str:
        return f"http://{self._address[0]}:{self.port}"

    @property
    def url(self) -> str:
        """The MAAS URL python-libmaas connects to, e.g. http://127.0.0.1:PORT/MAAS/."""
        return f"{self.root_url}/MAAS/"

    @property
    def api_key(self) -> str:
        """`consumer:token:secret`, as python-libmaas's `connect(url, apikey=...)` takes it."""
        return self.core.api_key.text

    @property
    def nodes(self) -> NspawnNodes | None:
        """The real nodes behind the machines (NSPAWN backend), else None."""
        return self.core.lifecycle.nodes

    @property
    def admin(self) -> AdminClient:
        return AdminClient(self.root_url)

    def __repr__(self) -> str:
        state = f"url={self.url}" if self._server else "stopped"
        return f"MaasSimulator({state})"
