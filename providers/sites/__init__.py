"""The sites area's kinds (bundles, profiles, RoCE): specs, pure cores and reconcilers, no Pulumi.
The adapters live in providers/bootstrap_bundle.py, site_profile.py, roce_assignment.py (state contract)."""
