"""HostConvergence's spec (the compiled inventory), pure planning and the ansible run; no Pulumi.
The adapter lives in providers/host_convergence.py (state contract)."""
