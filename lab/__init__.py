"""The three-host lab: nspawn machines on private network namespaces (see lab/lab.py)."""

from .lab import Lab, LabArtifact, LabInfo, clean_stale, describe, preflight

__all__ = ["Lab", "LabArtifact", "LabInfo", "clean_stale", "describe", "preflight"]
