"""The catalogue of error codes the platform API returns in the envelope's `code`.

Clients compare against these (`err.code == ErrorCode.SITE_NAME_CONFLICT`); the envelope's schema
keeps `code` a plain string so a new server-side code never breaks an old client.
"""

from __future__ import annotations

from enum import StrEnum


class ErrorCode(StrEnum):
    # request shape (400/415/422)
    INVALID_REQUEST_ID = "invalid_request_id"
    MALFORMED_JSON = "malformed_json"
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    VALIDATION_FAILED = "validation_failed"
    INVALID_QUERY_PARAMETER = "invalid_query_parameter"
    INVALID_CURSOR = "invalid_cursor"
    IDEMPOTENCY_KEY_REQUIRED = "idempotency_key_required"
    IDEMPOTENCY_KEY_INVALID = "idempotency_key_invalid"
    IDEMPOTENCY_KEY_REUSED = "idempotency_key_reused"
    # authentication and authorization (401/403)
    UNAUTHENTICATED = "unauthenticated"
    ROLE_NOT_PERMITTED = "role_not_permitted"
    PROJECT_BOUNDARY = "project_boundary"
    TENANT_BOUNDARY = "tenant_boundary"
    # not found (404)
    SITE_NOT_FOUND = "site_not_found"
    PROFILE_NOT_FOUND = "profile_not_found"
    NODE_NOT_FOUND = "node_not_found"
    APP_INSTANCE_NOT_FOUND = "app_instance_not_found"
    MEMBER_NOT_FOUND = "member_not_found"
    OPERATION_NOT_FOUND = "operation_not_found"
    ROUTE_NOT_FOUND = "route_not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"
    BODY_TOO_LARGE = "body_too_large"
    HTTP_ERROR = "http_error"
    # sites and profiles
    SITE_NAME_CONFLICT = "site_name_conflict"
    SITE_IN_USE = "site_in_use"
    PROFILE_NAME_CONFLICT = "profile_name_conflict"
    PROFILE_IN_USE = "profile_in_use"
    PROFILE_NOT_IN_SITE = "profile_not_in_site"
    # node bootstrap and enrollment
    NODE_NOT_MINTABLE = "node_not_mintable"
    ILLEGAL_NODE_TRANSITION = "illegal_node_transition"
    ENROLLMENT_TOKEN_INVALID = "enrollment_token_invalid"
    ENROLLMENT_TOKEN_EXPIRED = "enrollment_token_expired"
    ENROLLMENT_TOKEN_REVOKED = "enrollment_token_revoked"
    ENROLLMENT_TOKEN_USED = "enrollment_token_used"
    ENROLLMENT_TOKEN_NODE_MISMATCH = "enrollment_token_node_mismatch"
    ENROLLMENT_IDENTITY_MISMATCH = "enrollment_identity_mismatch"
    NODE_NOT_AWAITING_ENROLLMENT = "node_not_awaiting_enrollment"
    AGENT_CREDENTIAL_INVALID = "agent_credential_invalid"
    NODE_NOT_ENROLLED = "node_not_enrolled"
    # app instances, members, operations
    INSTANCE_NAME_CONFLICT = "instance_name_conflict"
    INSTANCE_NOT_READY = "instance_not_ready"
    INSTANCE_DECOMMISSIONED = "instance_decommissioned"
    OPERATION_IN_PROGRESS = "operation_in_progress"
    ILLEGAL_MEMBER_TRANSITION = "illegal_member_transition"
    NODE_NOT_AVAILABLE = "node_not_available"
    NODE_ALREADY_BOUND = "node_already_bound"
    DUPLICATE_PLACEMENT = "duplicate_placement"
    # app adapter rules (Slurm: controller x1, worker xN)
    UNKNOWN_COMPONENT_KEY = "unknown_component_key"
    DUPLICATE_COMPONENT_KEY = "duplicate_component_key"
    COMPONENT_CARDINALITY = "component_cardinality"
    COMPONENT_MISSING = "component_missing"
    TOO_MANY_PLACEMENTS = "too_many_placements"
    OPERATION_NOT_SUPPORTED = "operation_not_supported"
    DRAIN_ORDER = "drain_order"  # RKE2: servers are drained last
    ALLOCATION_SHAPE_UNSUPPORTED = "allocation_shape_unsupported"
    NODE_CREDENTIALS_REFUSED = "node_credentials_refused"  # seed 000 §1: no SSH material in app config
    # the UI gateway's route contract (seed 000 §4)
    ROUTE_REJECTED = "route_rejected"
    ROUTE_NAME_CONFLICT = "route_name_conflict"
    UI_ROUTE_NOT_FOUND = "ui_route_not_found"
    # platform side (5xx)
    INTERNAL_ERROR = "internal_error"
    INJECTED_FAULT = "injected_fault"
    # raised by the client itself (no HTTP response, or an operation that failed)
    TRANSPORT_ERROR = "transport_error"
    TLS_UNTRUSTED = "tls_untrusted"
    WAIT_TIMEOUT = "wait_timeout"
    OPERATION_FAILED = "operation_failed"
    INVALID_RESPONSE = "invalid_response"
    INVALID_ERROR_RESPONSE = "invalid_error_response"
