"""Read-only queries an operator makes and the functions never do: incidents by state (the
incidents table's `by_state` index) and every chain in the audit log (a Scan of the audit table).

Layout: docs/pipeline.md, "Storage". Only the `sdc` CLI uses them, so they stay out of the
Lambda asset.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from sdc_remediation.lambdas.adapters._aws import DynamoTable, pages
from sdc_remediation.lambdas.adapters.dynamodb.audit import DynamoAuditLog
from sdc_remediation.lambdas.adapters.dynamodb.incidents import incidents_in_state
from sdc_remediation.lambdas.adapters.dynamodb.keys import hold_key
from sdc_remediation.lambdas.models.guard import ClusterHold
from sdc_remediation.lambdas.models.incident import Incident, IncidentState

HOLD_PREFIX: Final = hold_key("")["pk"]
"""`HOLD#`: storm hold records (`HELD#<cluster>` is the pointer to a cluster's active one)."""

OPEN_STATES: Final = tuple(s for s in IncidentState if not s.terminal)
"""Opened, in a health check, awaiting approval, replacing: what still needs someone."""


class DynamoIncidentQueries(DynamoTable):
    """Incidents by state through the `by_state` index (eventually consistent, as every GSI)."""

    def by_state(self, state: IncidentState) -> list[Incident]:
        """The incidents in `state`, oldest first."""
        return incidents_in_state(self, state)

    def in_states(self, states: Iterable[IncidentState]) -> list[Incident]:
        """The incidents in any of `states`, oldest first (one query per state)."""
        found = [incident for state in dict.fromkeys(states) for incident in self.by_state(state)]
        return sorted(found, key=lambda i: (i.created_at, i.incident_id))

    def storm_holds(self) -> list[ClusterHold]:
        """Every storm hold, active and reset, oldest first. A Scan of the incidents table:
        holds are few, but the table holds reports and flags too, so use it on demand."""
        return sorted(
            (
                ClusterHold.from_record(item)
                for item in pages(
                    self.client.scan,
                    "Scan",
                    TableName=self.table_name,
                    FilterExpression="begins_with(pk, :hold)",
                    ExpressionAttributeValues={":hold": {"S": HOLD_PREFIX}},
                )
            ),
            key=lambda h: (h.created_at, h.hold_id),
        )


class DynamoAuditChains(DynamoAuditLog):
    """Every subject of the audit log with its entries: incidents, and the `event#...` and
    `decision#...` subjects of refusals that could not be tied to an incident
    (`DynamoAuditLog.all_chains`)."""
