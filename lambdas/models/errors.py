"""The errors the pipeline raises on purpose: the vocabulary shared by every layer.

Adapters translate botocore's `ClientError` into these (`raise NodeNotFound(...) from err`), so the
logic never sees botocore types; each error can describe itself for the audit log.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sdc_remediation.lambdas.models.isolation import IsolationCause
from sdc_remediation.lambdas.models.telemetry import TelemetryState


@dataclass(frozen=True, slots=True)
class ErrorRecord:
    """Why an incident failed (`Incident.error`): an error's `details()` with the step that met
    it, the state machine's `{Error, Cause}`, and `close_mismatch` when a close outcome did not
    follow from the incident's state. The keys are the error's own, so they are kept as given;
    the ones people read have names here."""

    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str | None:
        """The error's class, the state machine's error name, or the AWS error code."""
        return self.details.get("type") or self.details.get("Error") or self.details.get("code")

    @property
    def message(self) -> str | None:
        return (
            self.details.get("message")
            or self.details.get("Cause")
            or self.details.get("close_mismatch")
        )

    @property
    def step(self) -> str | None:
        return self.details.get("step")

    @property
    def close_mismatch(self) -> str | None:
        return self.details.get("close_mismatch")

    def with_mismatch(self, mismatch: str) -> ErrorRecord:
        return ErrorRecord({**self.details, "close_mismatch": mismatch})

    def to_record(self) -> dict[str, Any]:
        return dict(self.details)

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ErrorRecord:
        return cls(dict(record))


class SdcError(Exception):
    """Base of every error raised on purpose by the remediation pipeline."""

    retryable = False
    """True for errors that a later attempt of the same step may not meet (throttling, a
    service-side failure): the step leaves the incident as it is, and the state machine's Retry
    (matched on the class name, Lambda's `errorType`) calls the step again."""

    def details(self) -> dict[str, Any]:
        """What the audit log and the incident record keep about this error."""
        return {"type": type(self).__name__, "message": str(self)}


class MalformedEvent(SdcError, ValueError):
    """An event or payload that does not have the documented shape; names the bad field."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason

    def details(self) -> dict[str, Any]:
        return {**super().details(), "field": self.field, "reason": self.reason}


class SettingsError(SdcError, ValueError):
    """A setting is missing or has a bad value, raised before any work: a function's environment
    (`sdc_remediation.lambdas.models.settings`) or a deployment's `sdc:*` context key (`infra/stack/settings.py`); the
    message names the variable or key and what is expected."""


class AwsError(SdcError):
    """An AWS call failed; carries the operation, the AWS error code and the request id."""

    def __init__(
        self,
        message: str,
        *,
        operation: str | None = None,
        code: str | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message)
        self.operation = operation
        self.code = code
        self.request_id = request_id

    def details(self) -> dict[str, Any]:
        return {
            **super().details(),
            "operation": self.operation,
            "code": self.code,
            "request_id": self.request_id,
        }


class ClusterNotFound(AwsError):
    """The HyperPod cluster does not exist (or is not visible to this role)."""


class NodeNotFound(AwsError):
    """The instance is not (or no longer) a node of the cluster."""


class ReplacementRejected(AwsError):
    """BatchReplaceClusterNodes refused the node for a reason that waiting will not fix."""


class Throttled(AwsError):
    """AWS throttled the call; retrying later may succeed."""

    retryable = True


class ServiceUnavailable(AwsError):
    """The service failed on its side (InternalFailure, ServiceUnavailable, 5xx): retry later."""

    retryable = True


class ConditionFailed(AwsError):
    """A conditional write lost: the item changed (or exists) since it was read."""


class TaskNotWaiting(AwsError):
    """SendTaskSuccess found no waiting task: the token timed out, was used or is invalid."""


class DependencyFailed(AwsError):
    """Any other failed AWS call."""


class ExecutionNotFound(AwsError):
    """DescribeExecution found no such execution (or this role may not see it)."""


class IdentityRefused(SdcError):
    """An approver's identity proof was refused: malformed, expired, bound to another decision,
    or its signature not accepted by STS."""


class IncidentNotFound(SdcError):
    """No incident with this id."""


class ClaimNotConfirmed(SdcError):
    """Kubernetes does not confirm what an unauthenticated event claims about a node
    (`sdc_remediation.lambdas.logic.opening.claims`)."""


class InvalidTransition(SdcError):
    """A step asked for a state change the lifecycle does not allow."""


class ReplacementNotApproved(SdcError):
    """Replacement was asked for an incident without an `approve` decision: never replace."""


class DecisionRefused(SdcError):
    """The approval input was refused (unknown decision, wrong state, already decided...)."""


class KubernetesError(SdcError):
    """A call to a cluster's Kubernetes API failed; `cause` says how, for the incident record
    and the approval card."""

    cause: IsolationCause = IsolationCause.REFUSED

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    def details(self) -> dict[str, Any]:
        return {**super().details(), "cause": self.cause, "status": self.status}


class KubernetesUnreachable(KubernetesError):
    """No answer: DNS, connection, TLS or timeout (or DescribeCluster of the EKS cluster failed)."""

    cause = IsolationCause.UNREACHABLE


class KubernetesUnauthorized(KubernetesError):
    """401 or 403: the token was refused, or RBAC does not let the function's role do this."""

    cause = IsolationCause.UNAUTHORIZED


class KubernetesNotFound(KubernetesError):
    """No node with this name (404), or no node whose providerID names the instance."""

    cause = IsolationCause.NOT_FOUND


class KubernetesConflict(KubernetesError):
    """409 Conflict on every attempt: the node kept changing under us."""

    cause = IsolationCause.CONFLICT


class KubernetesNotConfigured(KubernetesError):
    """This deployment has no Kubernetes access for the cluster."""

    cause = IsolationCause.NOT_CONFIGURED


class RebootNotApproved(SdcError):
    """A reboot was asked for an incident without a `reboot` decision: never reboot."""


class RebootRejected(AwsError):
    """BatchRebootClusterNodes refused the node for a reason that waiting will not fix."""


class TelemetryError(SdcError):
    """A query of a cluster's Prometheus workspace (hardware telemetry) failed; `cause` is the
    state the incident's telemetry record takes (`sdc_remediation.lambdas.models.telemetry.TelemetryState`).
    Never fatal: the approval card says so in one line."""

    cause: TelemetryState = TelemetryState.FAILED

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    def details(self) -> dict[str, Any]:
        return {**super().details(), "cause": self.cause, "status": self.status}


class TelemetryNotConfigured(TelemetryError):
    """The cluster has no workspace in this deployment's `sdc:telemetry`."""

    cause = TelemetryState.NOT_CONFIGURED


class TelemetryUnreachable(TelemetryError):
    """No answer: DNS, connection, TLS, or the service failed on its side (5xx, 429)."""

    cause = TelemetryState.UNREACHABLE


class TelemetryRefused(TelemetryError):
    """401 or 403 (the role may not aps:QueryMetrics on the workspace), 404 (no such
    workspace), or no credentials to sign the request with."""

    cause = TelemetryState.REFUSED


class TelemetrySlow(TelemetryError):
    """No complete answer within the time the approval request allows the query."""

    cause = TelemetryState.SLOW


class TelemetryBadAnswer(TelemetryError):
    """An answer the pipeline cannot use: a query error, not JSON, not a matrix, too large."""

    cause = TelemetryState.FAILED


class SlurmError(SdcError):
    """A command on a Slurm cluster's controller (through SSM Run Command) failed; `cause` says
    how, for the incident record and the approval card."""

    cause: IsolationCause = IsolationCause.REFUSED

    def details(self) -> dict[str, Any]:
        return {**super().details(), "cause": self.cause}


class SlurmUnreachable(SlurmError):
    """Run Command refused the command, or it did not finish in time (no SSM agent, the
    controller stopped, a throttled call)."""

    cause = IsolationCause.UNREACHABLE


class SlurmNodeNotFound(SlurmError):
    """The controller knows no node by that name."""

    cause = IsolationCause.NOT_FOUND


class SlurmNotConfigured(SlurmError):
    """This deployment names no controller for the cluster."""

    cause = IsolationCause.NOT_CONFIGURED
