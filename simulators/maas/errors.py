"""MAAS API errors with the status and body a real region sends.

Sources (canonical/maas): `maasserver/exceptions.py` (text/plain bodies for MAASAPIException,
JSON for form errors), `api/machines.py`, `api/nodes.py`, `api/interfaces.py`,
`api/blockdevices.py`, `models/node.py`, `forms/ephemeral.py`.
"""

from __future__ import annotations

import json
from typing import Any

from .enums import NodeStatus


class ApiError(Exception):
    """Raised by an action; the HTTP layer turns it into the response MAAS would send."""

    def __init__(self, status: int, body: str | bytes, content_type: str = "text/plain; charset=utf-8",
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(f"{status}: {body!r}")
        self.status = status
        self.body = body.encode() if isinstance(body, str) else body
        self.content_type = content_type
        self.headers = headers or {}


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def validation(errors: dict[str, list[str]] | str) -> ApiError:
    """MAASAPIValidationError: a field dict is JSON, a single message is text/plain."""
    if isinstance(errors, str):
        return ApiError(400, errors, "text/plain; charset=utf-8")
    return ApiError(400, json.dumps(errors), "application/json; charset=utf-8")


def conflict(message: str) -> ApiError:
    """NodeStateViolation."""
    return ApiError(409, message)


def not_found(model: str) -> ApiError:
    """Django's get_object_or_404 through MAAS's middleware."""
    return ApiError(404, f"No {model} matches the given query.")


def forbidden(message: str = "") -> ApiError:
    return ApiError(403, message)


def power_problem(message: str) -> ApiError:
    """PowerProblem: 503."""
    return ApiError(503, message)


def unauthorized(message: str) -> ApiError:
    # piston's send_oauth_error: 401, the message as body, an OAuth challenge header.
    return ApiError(401, message, "text/html; charset=utf-8", {"WWW-Authenticate": 'OAuth realm="OAuth"'})


def unrecognised(method: str, op: str | None) -> ApiError:
    return ApiError(400, f"Unrecognised signature: method={method} op={op}")


# --- the state violations, one function per refused op --------------------------------------
def commission_refused() -> ApiError:
    return validation({"__all__": ["Commission is not available because of the current state of the node."]})


def deploy_refused(status: NodeStatus) -> ApiError:
    return conflict(f"Can't deploy a machine that is in the '{status.label}' state")


def release_refused(status: NodeStatus) -> ApiError:
    return conflict(f"Machine cannot be released in its current state ('{status.label}').")


def abort_refused(system_id: str, status: NodeStatus) -> ApiError:
    return conflict(f"Cannot abort in current state: node {system_id} is in state {status.label}.")


def accept_refused(system_id: str, status: NodeStatus) -> ApiError:
    return conflict(f"Cannot accept node enlistment: node {system_id} is in state {status.label}.")


def storage_layout_refused() -> ApiError:
    return conflict("Cannot change the storage layout on a machine that is not Ready.")


def boot_disk_refused() -> ApiError:
    return conflict("Cannot set as boot disk because the machine is not Ready.")


def interface_refused(operation: str) -> ApiError:
    return conflict(f"Cannot {operation} interface because the machine is not New, Ready, Allocated, or Broken.")


def mark_fixed_refused() -> ApiError:
    return conflict("Can't mark a non-broken node as 'Ready'.")


def mark_broken_refused(status: NodeStatus) -> ApiError:
    return conflict(f"Invalid transition: {status.label} -> Broken.")


def power_on_refused() -> ApiError:
    return conflict("Can't start node: it hasn't been allocated.")


def owner_data_refused() -> ApiError:
    return conflict("Cannot set workload annotation: it hasn't been acquired.")


def field_error(field: str, message: str) -> ApiError:
    return validation({field: [message]})


def invalid_choice(field: str, value: Any) -> ApiError:
    return field_error(field, f"Select a valid choice. {value} is not one of the available choices.")
