"""AppInstance internals: spec (inputs + checks), plan (pure member planning), reconciler (platform calls).

The dynamic-provider adapter is `providers/app_instance.py` (its import path is part of the state contract).
"""
