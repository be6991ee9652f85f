"""Embedded stand-ins for MAAS, the platform, S3 and Vault (tests, demo, benchmarks only)."""

from clients.threadsafe_ast import install

install()  # the simulators serve on threads (clients/threadsafe_ast.py)
