"""ReportStore on the incidents table: SDC reports under (cluster, instance), newest last."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from sdc_remediation.lambdas.adapters._aws import aws_call, from_item, to_item
from sdc_remediation.lambdas.adapters.dynamodb._table import ItemTable
from sdc_remediation.lambdas.adapters.dynamodb.keys import report_pk
from sdc_remediation.lambdas.models.report import SdcReport, parse_report, report_order_key


class DynamoReportStore(ItemTable):
    """Implements ReportStore: per (cluster, instance) and report, one marker item
    (`id#<report id>`, the first copy wins; it names the other's key) and one item holding the report under the time the
    pipeline received it, written together: `at#<received_at>#<report id>` when it was put as
    pointing at the instance, `involved#<received_at>#<report id>` otherwise (one query per kind
    reads the newest of each). The latest report is the one received last,
    never the one whose reporter claims the latest `emitted_at`."""

    def put_report(
        self, report: SdcReport, instance_id: str, expires_at: int, *, pointing: bool
    ) -> bool:
        pk = report_pk(report.cluster_name, instance_id)
        sk = _prefix(pointing) + report.order_key
        marker = {
            "pk": pk,
            "sk": f"{_MARKER}{report.report_id}",
            "stored_as": sk,
            "expires_at": expires_at,
        }
        item = {
            "pk": pk,
            "sk": sk,
            "report_id": report.report_id,
            "cluster_name": report.cluster_name,
            "instance_id": instance_id,
            "emitted_at": report.emitted_at,
            "received_at": report.received_at,
            "stale": report.stale,
            "detail": dict(report.detail),
            "expires_at": expires_at,
        }
        cancelled = self.transact(
            [("marker", {"Put": self.new(marker)}), ("report", {"Put": self.new(item)})]
        )
        if cancelled is None:
            return True
        if "marker" in cancelled.failed:
            return False
        raise cancelled.error

    def recent_reports(self, cluster_name: str, instance_id: str, limit: int) -> list[SdcReport]:
        return [
            *self._newest(cluster_name, instance_id, _POINTING, limit),
            *self._newest(cluster_name, instance_id, _INVOLVED, limit),
        ]

    def _newest(
        self, cluster_name: str, instance_id: str, prefix: str, limit: int
    ) -> list[SdcReport]:
        with aws_call("Query"):
            response = self.client.query(
                TableName=self.table_name,
                KeyConditionExpression="pk = :pk AND begins_with(sk, :received)",
                ExpressionAttributeValues=to_item(
                    {":pk": report_pk(cluster_name, instance_id), ":received": prefix}
                ),
                ScanIndexForward=False,
                Limit=limit,
                ConsistentRead=True,
            )
        return [_stored(item) for item in map(from_item, response.get("Items", []))]

    def stored_report(
        self, cluster_name: str, instance_id: str, received_at: str, report_id: str
    ) -> SdcReport | None:
        pk = report_pk(cluster_name, instance_id)
        marker = self.read({"pk": pk, "sk": f"{_MARKER}{report_id}"})
        if marker and marker.get("stored_as"):
            keys = [str(marker["stored_as"])]
        else:  # a marker written before it named its report's item
            keys = [p + report_order_key(received_at, report_id) for p in (_POINTING, _INVOLVED)]
        for sk in keys:
            item = self.read({"pk": pk, "sk": sk})
            if item:
                return _stored(item)
        return None


def _stored(item: dict[str, Any]) -> SdcReport:
    return dataclasses.replace(
        parse_report(item["detail"]),
        received_at=item.get("received_at"),
        stale=bool(item.get("stale")),
    )


_MARKER = "id#"
_POINTING = "at#"
_INVOLVED = "involved#"


def _prefix(points_at: bool) -> str:
    return _POINTING if points_at else _INVOLVED


if TYPE_CHECKING:
    from sdc_remediation.lambdas.logic.ports import ReportStore

    _reports: ReportStore = DynamoReportStore("t")
