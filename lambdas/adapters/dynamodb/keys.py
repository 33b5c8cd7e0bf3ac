"""The items of the incidents table, by key: one home for its layout (docs/pipeline.md,
"Storage"). The table is shared by every adapter of this package except the audit log's."""

from __future__ import annotations

from typing import Any, Final

from sdc_remediation.lambdas.models.guard import PastIncident

BY_STATE_INDEX: Final = "by_state"
"""infra/stack/storage.py's index (pk `state`, sk `created_at`); retyped because the Lambda asset
holds `lambdas/` only, not `infra/`."""

META = "META"
LOCK = "LOCK"
GUARD = "GUARD"
TASK = "TASK"
TASK_TOKEN_PREFIX: Final = "TOKEN#"
"""The task tokens' items: infra/stack/approval.py keeps approvers from reading them."""


def incident_key(incident_id: str) -> dict[str, Any]:
    return {"pk": f"INCIDENT#{incident_id}", "sk": META}


def task_token_key(incident_id: str) -> dict[str, Any]:
    """The item holding an incident's task token: apart from the incident, under a prefix the
    approvers' policy may not read (infra/stack/approval.py); no `state`, so never in
    `by_state`."""
    return {"pk": f"{TASK_TOKEN_PREFIX}{incident_id}", "sk": TASK}


def lock_key(cluster_name: str, instance_id: str) -> dict[str, Any]:
    return {"pk": f"OPEN#{cluster_name}#{instance_id}", "sk": LOCK}


def held_lock_key(cluster_name: str, instance_id: str) -> dict[str, Any]:
    return {"pk": f"HELDFOR#{cluster_name}#{instance_id}", "sk": LOCK}


def proof_key(proof_id: str) -> dict[str, Any]:
    return {"pk": f"PROOF#{proof_id}", "sk": LOCK}


def report_pk(cluster_name: str, instance_id: str) -> str:
    return f"REPORT#{cluster_name}#{instance_id}"


def guard_key(cluster_name: str) -> dict[str, Any]:
    return {"pk": f"GUARD#{cluster_name}", "sk": GUARD}


def tally_key(cluster_name: str, counter: str) -> dict[str, Any]:
    return {"pk": f"TALLY#{cluster_name}", "sk": counter}


def flag_pk(cluster_name: str) -> str:
    return f"FLAG#{cluster_name}"


def hold_key(hold_id: str) -> dict[str, Any]:
    return {"pk": f"HOLD#{hold_id}", "sk": META}


def held_key(cluster_name: str) -> dict[str, Any]:
    return {"pk": f"HELD#{cluster_name}", "sk": LOCK}


def instance_history_pk(instance_id: str) -> str:
    return f"HISTORY#INSTANCE#{instance_id}"


def gpu_history_pk(gpu_uuid: str) -> str:
    return f"HISTORY#GPU#{gpu_uuid}"


def history_pks(past: PastIncident) -> list[str]:
    return [instance_history_pk(past.instance_id)] + [gpu_history_pk(g) for g in past.gpu_uuids]
