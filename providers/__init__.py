"""Dynamic providers, one package per resource kind."""

import atexit
import gc

from clients.threadsafe_ast import install

install()  # the provider server imports our modules on its worker threads (clients/threadsafe_ast.py)

# The CLI interrupts each provider plugin when a pass ends and waits for it to exit, on the pass's critical
# path (an `up` has two passes). CPython's exit then collects every object the imports and the run made,
# ~0.2 s for this project's modules. Frozen at exit, the heap is left to the OS; what atexit and
# weakref.finalize run (logging's flush, temporary files) still runs, before the interpreter stops.
atexit.register(gc.freeze)
