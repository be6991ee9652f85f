"""Run the project's program (``__main__.py``) in this process against the engine's monitor.

The SDK is pointed at ``EngineMonitor`` through its mock settings, config is installed as the CLI's
language host would install it, and the program runs inside ``run_in_stack`` so exports become stack
outputs. The loop's default executor is widened: the SDK blocks one executor thread per in-flight
registration, and the provider server's own 4 workers must be what bounds parallelism, not this pool.
"""

from __future__ import annotations

import asyncio
import os
import runpy
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from typing import Any

from pulumi.errors import RunError
from pulumi.runtime import config as runtime_config
from pulumi.runtime import settings as runtime_settings
from pulumi.runtime.mocks import MockSettings
from pulumi.runtime.proto import engine_pb2
from pulumi.runtime.stack import run_in_stack

from engine.config import StackConfig
from engine.deployment import Deployment
from engine.model import Severity
from engine.monitor import EngineMonitor

_EXECUTOR_THREADS = 64
_SEVERITY = {
    engine_pb2.DEBUG: Severity.DEBUG,
    engine_pb2.INFO: Severity.INFO,
    engine_pb2.WARNING: Severity.WARNING,
    engine_pb2.ERROR: Severity.ERROR,
}


class _EngineLog:
    """Receives ``pulumi.log.*`` from the program: info, warning and error messages become diagnostics."""

    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment

    def Log(self, request: Any) -> None:  # noqa: N802 (gRPC method name)
        severity = _SEVERITY.get(request.severity, Severity.INFO)
        if severity is Severity.DEBUG:
            return
        # Info messages are diagnostics too (the CLI's preview JSON lists them); only debug is dropped.
        self.deployment.diag(request.message, severity, request.urn or None)


def run_program(cfg: StackConfig, deployment: Deployment) -> bool:
    """Run the program to completion. Returns False (with an error diagnostic) if it raised."""
    project = cfg.project
    monitor = EngineMonitor(deployment)
    settings = MockSettings(
        monitor=monitor,
        monitor_features=set(monitor.GetDeploymentInfo(None).supportedFeatures),
        engine=_EngineLog(deployment),
        project=project.name,
        stack=cfg.stack,
        dry_run=deployment.dry_run,
        organization="organization",
        root_directory=str(project.directory),
        callbacks=None,
    )
    runtime_settings.configure(settings)
    runtime_config.set_all_config(dict(cfg.values), [])
    sys.path.insert(0, str(project.directory))
    os.chdir(project.directory)
    main = str(project.main_path)

    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    loop.set_default_executor(ThreadPoolExecutor(max_workers=_EXECUTOR_THREADS))
    try:

        def program() -> None:
            runpy.run_path(main, run_name="__main__")

        loop.run_until_complete(run_in_stack(program))
        return True
    except RunError as exn:
        deployment.diag(f"program failed: {exn}")
    except BaseException as exn:  # noqa: BLE001 - the user's program may raise anything; report it
        if isinstance(exn, KeyboardInterrupt):
            raise
        deployment.emit(traceback.format_exc())
        deployment.diag(f"program failed: {type(exn).__name__}: {exn}")
    finally:
        pending = asyncio.all_tasks(loop)
        for task in pending:
            task.cancel()
            with suppress(BaseException):
                loop.run_until_complete(task)
        loop.close()
    return False
