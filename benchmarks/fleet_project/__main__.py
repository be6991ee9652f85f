"""Benchmark program: the same machine specs as one MachinePool or as one MaasMachine each.

Config (set by benchmarks/bench_machines.py): `fleet:mode` (pool | machines), `fleet:specs` (JSON list
of machine specs), `fleet:connection` and `fleet:policy` (JSON).
"""

import json

import pulumi

from providers.maas_machine import MaasMachine
from providers.machine_pool import MachinePool
from providers.machines.resource_io import wire_machines

config = pulumi.Config("fleet")
specs = json.loads(config.require("specs"))
connection = json.loads(config.require("connection"))
policy = json.loads(config.require("policy"))

if config.require("mode") == "pool":
    props = {"pool": "bench", "machines": wire_machines(specs), "connection": connection, "policy": policy}
    pool = MachinePool("bench-pool", props)
    pulumi.export("counts", pool.counts)
else:
    for spec in specs:
        MaasMachine(f"machine-{spec['hostname']}", {"machine": spec, "connection": connection, "policy": policy})
