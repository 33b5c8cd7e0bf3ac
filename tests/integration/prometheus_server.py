"""What the integration tests' real Prometheus holds, and incidents that ask about it.

Five nodes' dcgm-exporter series, scraped every 15 s over three hours that ended two hours ago
(backfilled blocks never overlap the server's head, which stays empty: it scrapes nothing):

| node | how its series name it | what happens |
|---|---|---|
| `NODE_A` (`INSTANCE_A`) | `Hostname` = its `ip-…` Kubernetes name; exporter up to 4.8 names | GPU 1 (the suspect): XID 79 at +90:15, row remap failure at +90:45; GPU 0: XID 31 at +80:00 |
| `NODE_B` | `hostname` (exporter 4.8.3+) = `hyperpod-<instance id>`; DCGM 4.7 names (exporter 4.9+) | GPU 2: XID 94 at +95:00, row remap failed at +95:30 |
| `NODE_C` | `Hostname` | nothing: every counter quiet (ECC and retired pages exported too) |
| `NODE_D` | `Hostname` = `ip-10-1-17-43…`, a neighbour of `NODE_A` | GPU 1: XID 48 at +85:00 |
| `NODE_E` | `Hostname` = the exporter's pod name; the node in a relabeled `kubernetes_node` | GPU 0: XID 45 at +92:00 |
| `NODE_F` (`INSTANCE_F`) | as the HyperPod observability add-on stores them: counters under `_total` names, the collector's `job`, `instance`, `pod`, `namespace`, `container` | GPU 3: correctable remapped rows 0 → 2 at +98:00, PCIe replays 0 → 7 at +99:00; no XID |
| `NODE_G` (`INSTANCE_G`) | the add-on's way, GPU in `uuid`; a counters file with only the gauges (XID, row remap failure, temperature) | nothing |

The incidents' report was emitted at +100:00 and their alarm came at +101:00.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sdc_remediation.infra.local.prometheus import (
    DEFAULT_COUNTERS,
    RealPrometheus,
    Series,
    collector_labels,
    gpu_series,
)
from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.isolation import IsolatedNode, IsolationRecord, IsolationState
from sdc_remediation.lambdas.models.settings import TelemetryWorkspace

WORKSPACE_ID = "ws-0fc3b6e2-7d41-4a9b-8c55-2e1f0a9d3b77"
CLUSTER = "ml-cluster-1"

INSTANCE_A = "i-0aaa1234def567890"
NODE_A = "ip-10-1-17-42.us-west-2.compute.internal"
UUID_A0 = "GPU-a0a0a0a0-5a1e-4c1d-9e7b-000000000000"
UUID_A1 = "GPU-a1a1a1a1-5a1e-4c1d-9e7b-000000000001"
INSTANCE_B = "i-0bbb1234def567890"
NODE_B = f"hyperpod-{INSTANCE_B}"
UUID_B2 = "GPU-b2b2b2b2-5a1e-4c1d-9e7b-000000000002"
INSTANCE_C = "i-0ccc1234def567890"
NODE_C = "ip-10-1-17-50.us-west-2.compute.internal"
UUID_C0 = "GPU-c0c0c0c0-5a1e-4c1d-9e7b-000000000000"
NODE_D = "ip-10-1-17-43.us-west-2.compute.internal"
UUID_D1 = "GPU-d1d1d1d1-5a1e-4c1d-9e7b-000000000001"
INSTANCE_E = "i-0eee1234def567890"
NODE_E = "ip-10-1-17-60.us-west-2.compute.internal"
UUID_E0 = "GPU-e0e0e0e0-5a1e-4c1d-9e7b-000000000000"
INSTANCE_F = "i-0fff1234def567890"
NODE_F = "ip-10-1-17-70.us-west-2.compute.internal"
UUID_F3 = "GPU-f3f3f3f3-5a1e-4c1d-9e7b-000000000003"
INSTANCE_G = "i-0aab1234def567890"
NODE_G = "ip-10-1-17-80.us-west-2.compute.internal"
UUID_G0 = "GPU-a0b0a0b0-5a1e-4c1d-9e7b-000000000000"

NEWER_NAMES = {
    "DCGM_FI_DEV_GPU_TEMP_CELSIUS": 58,
    "DCGM_FI_DEV_PCIE_REPLAY_TOTAL": 0,
    "DCGM_FI_DEV_XID_ERROR": 0,
    "DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL": 0,
    "DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL": 0,
    "DCGM_FI_DEV_ROW_REMAP_FAILED": 0,
}
"""DEFAULT_COUNTERS under the names dcgm-exporter 4.9 exports (DCGM 4.7's)."""
GAUGES_ONLY = {
    "DCGM_FI_DEV_GPU_TEMP": 55,
    "DCGM_FI_DEV_XID_ERRORS": 0,
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": 0,
}
"""A counters file with no counter-type family: none of them may read as clean."""
ADVANCED = {
    **DEFAULT_COUNTERS,
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": 0,
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 0,
    "DCGM_FI_DEV_RETIRED_SBE": 0,
    "DCGM_FI_DEV_RETIRED_DBE": 0,
    "DCGM_FI_DEV_RETIRED_PENDING": 0,
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": 0x4,
}


@dataclass(frozen=True)
class Dataset:
    base: int
    """Epoch seconds the scrapes start at (on the hour)."""
    series: list[Series] = field(default_factory=list)

    def at(self, minutes: int, seconds: int = 0) -> int:
        return self.base + minutes * 60 + seconds

    def iso(self, minutes: int, seconds: int = 0) -> str:
        return datetime.fromtimestamp(self.at(minutes, seconds), UTC).isoformat()

    def clock(self, minutes: int, seconds: int = 0) -> str:
        return datetime.fromtimestamp(self.at(minutes, seconds), UTC).strftime("%H:%M:%S UTC")

    @classmethod
    def build(cls, now: float | None = None) -> Dataset:
        base = (int(now or time.time()) // 3600 - 5) * 3600
        start, end = base, base + 3 * 3600
        data = cls(base)

        def gpus(host: str, *specs: tuple[str, str, dict[str, Any]], **options: Any) -> None:
            for gpu, uuid, changes in specs:
                data.series.extend(
                    gpu_series(
                        host=host,
                        gpu=gpu,
                        uuid=uuid,
                        start=start,
                        end=end,
                        changes=changes,
                        **options,
                    )
                )

        gpus(
            NODE_A,
            ("0", UUID_A0, {"DCGM_FI_DEV_XID_ERRORS": [(data.at(80), 31)]}),
            (
                "1",
                UUID_A1,
                {
                    "DCGM_FI_DEV_XID_ERRORS": [(data.at(90, 15), 79)],
                    "DCGM_FI_DEV_ROW_REMAP_FAILURE": [(data.at(90, 45), 1)],
                },
            ),
        )
        gpus(
            NODE_B,
            (
                "2",
                UUID_B2,
                {
                    "DCGM_FI_DEV_XID_ERROR": [(data.at(95), 94)],
                    "DCGM_FI_DEV_ROW_REMAP_FAILED": [(data.at(95, 30), 1)],
                },
            ),
            host_label="hostname",
            counters=NEWER_NAMES,
        )
        gpus(NODE_C, ("0", UUID_C0, {}), counters=ADVANCED)
        gpus(NODE_D, ("1", UUID_D1, {"DCGM_FI_DEV_XID_ERRORS": [(data.at(85), 48)]}))
        for series in gpu_series(
            host="dcgm-exporter-x7k2q",
            gpu="0",
            uuid=UUID_E0,
            start=start,
            end=end,
            changes={"DCGM_FI_DEV_XID_ERRORS": [(data.at(92), 45)]},
        ):
            data.series.append(
                Series(series.name, {**series.labels, "kubernetes_node": NODE_E}, series.points)
            )
        gpus(
            NODE_F,
            (
                "3",
                UUID_F3,
                {
                    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": [(data.at(98), 2)],
                    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": [(data.at(99), 7)],
                },
            ),
            collector=collector_labels("dcgm-exporter-f7m2p", "10.1.17.71"),
        )
        gpus(
            NODE_G,
            ("0", UUID_G0, {}),
            uuid_label="uuid",
            counters=GAUGES_ONLY,
            collector=collector_labels("dcgm-exporter-g2k9d", "10.1.17.81"),
        )
        return data

    def incident(
        self,
        instance_id: str,
        *,
        node_name: str | None = None,
        gpu_uuid: str | None = None,
        isolated_as: str | None = None,
    ) -> Incident:
        """An incident whose report (emitted at +100:00) names the rank's node and GPU, and whose
        alarm came at +101:00; `isolated_as`: the node name isolation found by providerID."""
        incident = Incident(
            f"sdc-{CLUSTER}-{instance_id}-telemetry",
            CLUSTER,
            instance_id,
            IncidentState.HEALTH_CHECK,
            self.iso(100),
            self.iso(100),
        )
        incident.evidence = [
            {
                "kind": "report",
                "key": "report:r-1",
                "report_id": "r-1",
                "emitted_at": self.iso(100),
                "suspects": [
                    {"rank": 9, "role": "culprit", "node_name": node_name, "gpu_uuid": gpu_uuid}
                ],
            },
            {"kind": "alarm", "key": "alarm:e-1", "state_at": self.iso(101)},
        ]
        if isolated_as:
            incident.isolation = IsolationRecord(
                IsolationState.ISOLATED,
                nodes={instance_id: IsolatedNode(IsolationState.ISOLATED, node_name=isolated_as)},
            )
        return incident

    def later(self) -> datetime:
        """When the approval is requested: after the health check, well past the window."""
        return datetime.fromtimestamp(self.at(150), UTC)


def workspace(**changes: Any) -> TelemetryWorkspace:
    """The cluster's workspace as the functions' TELEMETRY names it (the tests point the
    adapter's local-only override at the server)."""
    return TelemetryWorkspace(
        workspace_id=WORKSPACE_ID,
        query_url=f"https://aps-workspaces.us-west-2.amazonaws.com/workspaces/{WORKSPACE_ID}",
        region="us-west-2",
        dashboard=changes.pop(
            "dashboard", "https://g-1a2b3c4d5e.grafana-workspace.us-west-2.amazonaws.com/d/gpu"
        ),
        **changes,
    )


@dataclass(frozen=True)
class PrometheusWorld:
    server: RealPrometheus
    data: Dataset

    def workspace(self, **changes: Any) -> TelemetryWorkspace:
        return workspace(**changes)
