"""Hardware telemetry for the approval card: what the suspect GPU's own counters recorded.

Before replacing a node, operators look at its GPUs' hardware counters. An XID, a failed or
pending row remap, retired pages, rising ECC counts, PCIe replays, NVLink errors or hardware
throttling raise confidence that the hardware is at fault. A clean panel does not clear it:
silent data corruption often leaves no trace in any counter (that is why the in-training checks
exist), and the card says so.

What is read: dcgm-exporter's series, which the HyperPod observability add-on writes to the
cluster's Amazon Managed Service for Prometheus workspace (`sdc:telemetry`), by the names the
exporter gives them (`sdc_remediation.lambdas.logic.evidence.dcgm.FAMILIES`). dcgm-exporter up to 4.8 exports DCGM's legacy field names
(`DCGM_FI_DEV_ROW_REMAP_FAILURE`); 4.9 renamed them to DCGM 4.7's (`DCGM_FI_DEV_ROW_REMAP_FAILED`;
DCGM's dcgm_fields.h lists each old name as an alias of its new one): both are asked for, each
also with `_total`, which the add-on's collector appends to counter-type families.

For which node: a series names its node in dcgm-exporter's `Hostname` label (`hostname` since
4.8.3), which on Kubernetes is the node name (`NODE_NAME` from the downward API), else the
exporter's host name. A series belongs to the suspect node when that label is one of the node's
Kubernetes names the incident knows (the node isolation found by providerID, the report's
`node_name`), or contains its instance id as a whole word (`hyperpod-i-…`). A cluster whose
series name nodes in another label sets `nodeLabel`. For which GPUs: the `UUID` (or `uuid`) label, when the
reports name the suspect ranks' GPU UUIDs; otherwise every GPU of the node.

When: from one hour before the first evidence (the report names its suspect window in training
steps, not clock time; the report and the alarm come right after it) to two minutes after the
last (scrapes lag), at most six hours, never past now. `query_range` steps are at least 15 s
and at most 480 per series: times are "first seen at", to within one step.

What counts as a signal: any XID; a row remap failed or pending; a page retirement pending;
a count that rose in the window (remapped rows, retired pages, ECC, PCIe replays, NVLink
errors); hardware throttling (HW slowdown, HW or SW thermal slowdown, HW power brake). A
non-zero lifetime count of uncorrectable faults that did not change in the window is shown as
history, not as a signal; the hottest temperature seen is context. "Clean" is said only of the
families read; the others are named as not exported for the node.

`check(deps, incident, now)` never raises: not configured, unreachable, refused, slow, a bad
answer: the record says so in one line, and the approval request goes on.
"""

from __future__ import annotations

import dataclasses
import time
from datetime import datetime

from sdc_remediation.lambdas.logic.evidence.dcgm import parse_matrix
from sdc_remediation.lambdas.logic.evidence.telemetry_findings import queried, summarize
from sdc_remediation.lambdas.logic.evidence.telemetry_query import query_for, target_of, window_of
from sdc_remediation.lambdas.logic.ports import Deps
from sdc_remediation.lambdas.models.errors import TelemetryError
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.telemetry import TelemetryRecord, TelemetryState


def gather(deps: Deps, incident: Incident, now: datetime) -> TelemetryRecord:
    """Query the cluster's workspace about the incident's node and GPUs; never raises."""
    # Imported here: the cards (and so the CLI) use this module without the Lambda runtime.
    from sdc_remediation.lambdas.observability import logger

    queried_at = now.isoformat()
    workspace = deps.settings.telemetry_for(incident.cluster_name)
    if workspace is None:
        return TelemetryRecord(
            state=TelemetryState.NOT_CONFIGURED,
            summary=(
                f"not configured for cluster {incident.cluster_name} (sdc:telemetry): look at "
                "the GPU's counters yourself before deciding"
            ),
            queried_at=queried_at,
        )
    target = target_of(incident)
    window = window_of(incident, now)
    started = time.monotonic()
    try:
        data = deps.prometheus.query_range(
            workspace, query_for(target, workspace), window.start, window.end, window.step_seconds
        )
        series = parse_matrix(data)
    except Exception as err:  # never stops the approval request: the card says why
        state = TelemetryState(err.cause) if isinstance(err, TelemetryError) else None
        if state is None:
            logger.exception("telemetry query failed", incident_id=incident.incident_id)
        record = dataclasses.replace(
            queried(workspace, target, window, queried_at, time.monotonic() - started),
            state=state or TelemetryState.FAILED,
            summary=f"not available: {str(err)[:500]}; this does not clear the node",
            error={"type": type(err).__name__, "message": str(err)[:1000]},
        )
    else:
        record = summarize(
            series,
            target,
            window,
            workspace,
            queried_at=queried_at,
            seconds=time.monotonic() - started,
        )
    logger.info(
        "telemetry checked",
        incident_id=incident.incident_id,
        state=record.state,
        series=record.series,
        seconds=record.seconds,
    )
    return record
