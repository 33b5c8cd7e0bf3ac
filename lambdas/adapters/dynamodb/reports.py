"""ReportStore on the incidents table: SDC reports under (cluster, instance), newest last."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lambdas.adapters._aws import aws_call, from_item, to_item
from lambdas.adapters.dynamodb._table import ItemTable
from lambdas.adapters.dynamodb.keys import report_pk
from lambdas.models.report import SdcReport, parse_report


class DynamoReportStore(ItemTable):
    """Implements ReportStore: one item per (cluster, instance, emitted_at, report id), the
    first copy kept."""

    def put_report(self, report: SdcReport, instance_id: str, expires_at: int) -> bool:
        item = {
            "pk": report_pk(report.cluster_name, instance_id),
            "sk": f"{report.emitted_at}#{report.report_id}",
            "report_id": report.report_id,
            "cluster_name": report.cluster_name,
            "instance_id": instance_id,
            "emitted_at": report.emitted_at,
            "detail": dict(report.detail),
            "expires_at": expires_at,
        }
        return self.put_if(self.new(item)) is None

    def latest_report(self, cluster_name: str, instance_id: str) -> SdcReport | None:
        with aws_call("Query"):
            response = self.client.query(
                TableName=self.table_name,
                KeyConditionExpression="pk = :pk",
                ExpressionAttributeValues=to_item({":pk": report_pk(cluster_name, instance_id)}),
                ScanIndexForward=False,
                Limit=1,
                ConsistentRead=True,
            )
        items = response.get("Items", [])
        return parse_report(from_item(items[0])["detail"]) if items else None


if TYPE_CHECKING:
    from lambdas.logic.ports import ReportStore

    _reports: ReportStore = DynamoReportStore("t")
