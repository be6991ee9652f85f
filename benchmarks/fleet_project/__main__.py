"""Benchmark program: the same machine specs as one MachinePool or as one MaasMachine each.

Config (set by benchmarks/bench_machines.py): `fleet:mode` (pool | machines), `fleet:specs` (JSON list
of machine specs), `fleet:connection` and `fleet:policy` (JSON).
"""

import json

import pulumi

from providers.maas_machine import MaasMachine
from providers.machine_pool import MachinePool

config = pulumi.Config("fleet")
specs = json.loads(config.require("specs"))
connection = json.loads(config.require("connection"))
policy = json.loads(config.require("policy"))

if config.require("mode") == "pool":
    pool = MachinePool("bench-pool", {"pool": "bench", "machines": specs, "connection": connection, "policy": policy})
    pulumi.export("counts", pool.counts)
else:
    for spec in specs:
        MaasMachine(f"machine-{spec['hostname']}", {"machine": spec, "connection": connection, "policy": policy})
