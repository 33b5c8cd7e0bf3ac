"""The names of the functions' environment variables: the one list both sides use.

The stack (`infra/stack/functions.py`) sets each function's environment from these members; the
functions read it through them (`sdc_remediation.lambdas.models.settings.Settings.from_env`,
`sdc_remediation.lambdas.observability`). docs/pipeline.md, "Environment", says which function gets which
variable and what it holds (tests/docs/test_tables_drift.py keeps that table to the stack).
"""

from __future__ import annotations

from enum import StrEnum


class EnvVar(StrEnum):
    """A function environment variable (the member's value is the variable's name)."""

    INCIDENTS_TABLE = "INCIDENTS_TABLE"
    AUDIT_TABLE = "AUDIT_TABLE"
    TOPIC_ARN = "TOPIC_ARN"
    STATE_MACHINE_ARN = "STATE_MACHINE_ARN"
    ALLOWED_CLUSTERS = "ALLOWED_CLUSTERS"
    HEALTH_CHECKS = "HEALTH_CHECKS"
    NAMESPACE = "NAMESPACE"
    DRY_RUN = "DRY_RUN"
    EVENT_BUS_NAME = "EVENT_BUS_NAME"
    APPROVAL_STATE_MACHINE_ARN = "APPROVAL_STATE_MACHINE_ARN"
    APPROVAL_TIMEOUT_SECONDS = "APPROVAL_TIMEOUT_SECONDS"
    APPROVER_TIME_ZONE = "APPROVER_TIME_ZONE"
    GUARD_MAX_OPEN_NODES = "GUARD_MAX_OPEN_NODES"
    GUARD_MAX_OPEN_PERCENT = "GUARD_MAX_OPEN_PERCENT"
    STORM_THRESHOLD = "STORM_THRESHOLD"
    STORM_WINDOW_SECONDS = "STORM_WINDOW_SECONDS"
    REPORT_OPENINGS_PER_MINUTE = "REPORT_OPENINGS_PER_MINUTE"
    JOB_OPENINGS_PER_MINUTE = "JOB_OPENINGS_PER_MINUTE"
    REPEAT_OFFENDER_INCIDENTS = "REPEAT_OFFENDER_INCIDENTS"
    REPEAT_OFFENDER_WINDOW_DAYS = "REPEAT_OFFENDER_WINDOW_DAYS"
    PAUSE_PARAMETER = "PAUSE_PARAMETER"
    NODE_ISOLATION = "NODE_ISOLATION"
    TELEMETRY = "TELEMETRY"
    APPROVALS_REQUIRED = "APPROVALS_REQUIRED"
    APPROVERS = "APPROVERS"
    HUMAN_SESSION_ROLES = "HUMAN_SESSION_ROLES"
    REQUIRE_IDENTITY_PROOF = "REQUIRE_IDENTITY_PROOF"
    AUDIT_ANCHOR_LOG_GROUP = "AUDIT_ANCHOR_LOG_GROUP"
    POWERTOOLS_SERVICE_NAME = "POWERTOOLS_SERVICE_NAME"
    """Powertools' own: the service name of logs and metrics."""
    POWERTOOLS_METRICS_NAMESPACE = "POWERTOOLS_METRICS_NAMESPACE"
    """Powertools' own: the CloudWatch namespace of the functions' metrics."""
