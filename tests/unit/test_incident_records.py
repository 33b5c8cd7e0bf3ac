"""The incident's parts as the steps store them: every stage of every part reads into its record
and is stored again key for key, and what an older writer left (fewer keys) still reads."""

from __future__ import annotations

from typing import Any

import pytest

from sdc_remediation.lambdas.models.incident import Incident, IncidentState
from sdc_remediation.lambdas.models.payloads import Decision

AT = "2026-11-30T08:15:13+00:00"
LATER = "2026-11-30T08:15:43+00:00"
CHECKS = ["InstanceStress", "InstanceConnectivity"]
NODE = "ip-10-1-17-42.us-west-2.compute.internal"
TAINT = "sdc.remediation/incident=sdc-1:NoSchedule"
DECIDED = {
    "decision": "reboot",
    "comment": "looks hot",
    "approval_execution_arn": "arn:a1",
    "at": AT,
}
NODE_CHECK = {
    "started": True,
    "checks": CHECKS,
    "status": "DeepHealthCheckInProgress",
    "result": None,
    "reason": None,
    "started_at": AT,
    "resumed": False,
}
SUMMARY = {**{k: v for k, v in NODE_CHECK.items() if k != "resumed"}, "result": "passed"}
REQUESTED = {
    "path": "api",
    "status": "requested",
    "attempts": 1,
    "dry_run": False,
    "pending": False,
    "requested_by_us": True,
    "requested_at": AT,
    "last": {"node_status": "Running", "path": "api", "path_reason": "through the API"},
    "sent_at": AT,
}
UNASKED = {**REQUESTED, "path": None, "requested_at": None, "requested_by_us": False}
REBOOT_STARTED = {
    "decision": DECIDED,
    "count": 1,
    "path": None,
    "status": None,
    "polls": 0,
    "seen_down": False,
}
ISOLATED_NODE = {
    "state": "isolated",
    "node_name": NODE,
    "resource_version": "2",
    "was_unschedulable": False,
    "cordoned_by_us": True,
    "taint_added": True,
    "found_taint": None,
    "reason": None,
    "cause": None,
}
SETTLED = {"taint": TAINT, "eks_cluster": "ml-eks-1", "cause": None, "reason": None, "at": AT}

STAGES: dict[str, dict[str, Any]] = {
    "health check written ahead": {"health_check": {"requesting_at": AT}},
    "health check started": {"health_check": NODE_CHECK},
    "health check not started": {
        "health_check": {
            **NODE_CHECK,
            "started": False,
            "status": "SystemUpdating",
            "result": "not_run",
            "reason": "node status is SystemUpdating, not Running",
            "started_at": None,
        }
    },
    "health check polled": {"health_check": {**NODE_CHECK, "polls": 2, "result": "passed"}},
    "health check set aside by a reboot": {
        "health_check": {"before_reboot": SUMMARY, "after_reboot": True, "requesting_at": LATER}
    },
    "health check after the reboot": {
        "health_check": {**NODE_CHECK, "after_reboot": True, "before_reboot": SUMMARY, "polls": 1}
    },
    "job health check": {
        "health_check": {
            "started": True,
            "checks": CHECKS,
            "nodes": {
                "i-0aa": {
                    "status": "Running",
                    "group": "gpu",
                    "started": True,
                    "reason": None,
                    "result": "passed",
                },
                "i-0bb": {
                    "status": "Pending",
                    "group": None,
                    "started": False,
                    "reason": "node status is Pending, not Running",
                    "result": "not_run",
                },
            },
            "status": "1 not_run, 1 passed",
            "result": "done",
            "reason": None,
            "started_at": AT,
            "polls": 3,
        }
    },
    "decision": {"decision": {**DECIDED, "decision": "approve"}},
    "replacement written ahead": {"replacement": {"pending": True, "sent_at": AT}},
    "replacement requested": {"replacement": REQUESTED},
    "replacement by hyperpod": {
        "replacement": {**UNASKED, "status": "in_progress", "node_status": "ShuttingDown"}
    },
    "replacement done": {
        "replacement": {
            **REQUESTED,
            "node_status": "ShuttingDown",
            "status": "done",
            "new_instance_id": "i-0f02",
            "done_at": LATER,
        }
    },
    "dry run replacement done": {
        "replacement": {
            **UNASKED,
            "dry_run": True,
            "status": "done",
            "new_instance_id": None,
            "done_at": LATER,
        }
    },
    "reboot started": {"decision": DECIDED, "reboot": REBOOT_STARTED},
    "reboot written ahead": {"reboot": {**REBOOT_STARTED, "pending": True, "sent_at": AT}},
    "reboot polled": {
        "reboot": {
            **REBOOT_STARTED,
            **REQUESTED,
            "node_status": "Pending",
            "polls": 1,
            "seen_down": True,
        }
    },
    "reboot done": {
        "reboot": {
            **REBOOT_STARTED,
            **REQUESTED,
            "status": "done",
            "node_status": "Running",
            "polls": 2,
            "seen_down": True,
            "done_at": LATER,
        }
    },
    "isolation written ahead": {
        "isolation": {
            "eks_cluster": "ml-eks-1",
            "nodes": {"i-0a": {"state": "pending", "node_name": NODE, "was_unschedulable": False}},
            "state": "pending",
        }
    },
    "isolation off": {
        "isolation": {
            **SETTLED,
            "eks_cluster": None,
            "nodes": {},
            "state": "not_isolated",
            "cause": "off",
            "reason": "node isolation is off",
        }
    },
    "isolation refused": {
        "isolation": {
            **SETTLED,
            "nodes": {
                "i-0a": {
                    "state": "not_isolated",
                    "node_name": None,
                    "cause": "unauthorized",
                    "reason": "unauthorized: 403",
                    "status": 403,
                }
            },
            "state": "not_isolated",
            "cause": "unauthorized",
            "reason": "i-0a: unauthorized: 403",
        }
    },
    "isolated": {"isolation": {**SETTLED, "nodes": {"i-0a": ISOLATED_NODE}, "state": "isolated"}},
    "isolation released": {
        "isolation": {
            **SETTLED,
            "nodes": {"i-0a": {**ISOLATED_NODE, "state": "released", "resource_version": "3"}},
            "state": "released",
            "released_at": LATER,
        }
    },
    "isolation release failed": {
        "isolation": {
            **SETTLED,
            "nodes": {
                "i-0a": {
                    **ISOLATED_NODE,
                    "state": "release_failed",
                    "cause": "unreachable",
                    "reason": "timed out",
                }
            },
            "state": "release_failed",
            "released_at": LATER,
        }
    },
    "paused": {"hold": {"kind": "paused", "reason": "paused", "hold_id": None}},
    "storm": {"hold": {"kind": "storm", "reason": "storm", "hold_id": "hold-c-storm-1"}},
    "muted": {
        "hold": {
            "kind": "muted",
            "reason": "muted",
            "hold_id": None,
            "mute_rule": "maintenance",
            "mute_rule_arn": "arn:aws:cloudwatch:us-west-2:1:alarm-mute-rule:maintenance",
            "mute_window_start": "2026-11-30T08:00:00+00:00",
            "mute_window_end": "2026-11-30T10:00:00+00:00",
        }
    },
    "step error": {
        "error": {
            "code": None,
            "message": "AccessDenied",
            "operation": None,
            "request_id": None,
            "step": "check_replacement",
            "type": "DependencyFailed",
        }
    },
    "state machine error": {"error": {"Error": "Lambda.Unknown", "Cause": "boom"}},
    "close mismatch": {
        "error": {"Error": "X", "Cause": "y", "close_mismatch": "outcome replaced does not follow"}
    },
}


def stored(**parts: Any) -> dict[str, Any]:
    """An incident's item as `Incident.to_record` writes it, with `parts`."""
    base = Incident(
        incident_id="sdc-1",
        cluster_name="c",
        instance_id="i-0a",
        state=IncidentState.AWAITING_APPROVAL,
        created_at=AT,
        updated_at=AT,
        evidence=[{"kind": "alarm", "key": "alarm:1", "metric": "sdc_replay_mismatch"}],
    ).to_record()
    return {**base, **parts}


@pytest.mark.parametrize("parts", STAGES.values(), ids=STAGES.keys())
def test_every_stage_of_every_part_is_stored_again_key_for_key(parts):
    item = stored(**parts)

    assert Incident.from_record(item).to_record() == item


def test_a_part_an_older_writer_left_with_fewer_keys_reads_and_is_stored_with_todays_keys():
    item = stored(
        decision={"decision": "approve"},
        hold={"kind": "paused", "reason": "paused"},
        health_check={"started": True, "checks": CHECKS, "result": "failed", "status": "Running"},
        reboot={"count": 1, "status": "done"},
        replacement={"status": "done", "new_instance_id": "i-0f05"},
        isolation={"state": "isolated", "nodes": {"i-0a": {"state": "isolated"}}},
    )

    incident = Incident.from_record(item)
    again = incident.to_record()

    assert incident.decided is Decision.APPROVE
    assert incident.hold_kind == "paused"
    assert (incident.health_check.result, incident.health_check.polls) == ("failed", None)
    assert incident.reboot_done and incident.reboot.count == 1
    assert incident.replacement.new_instance_id == "i-0f05"
    assert incident.isolation.node("i-0a").state == "isolated"
    assert again["decision"] == {
        "decision": "approve",
        "comment": None,
        "approval_execution_arn": None,
        "at": None,
    }
    assert again["hold"] == {"kind": "paused", "reason": "paused", "hold_id": None}
    assert again["health_check"] == {
        "started": True,
        "checks": CHECKS,
        "status": "Running",
        "result": "failed",
        "reason": None,
        "started_at": None,
    }
    assert again["replacement"] == {"status": "done", "new_instance_id": "i-0f05"}
    assert Incident.from_record(again).to_record() == again


def test_metrics_are_the_evidences_in_arrival_order_and_a_stored_list_is_not_read():
    evidence = [
        {"kind": "alarm", "key": "alarm:1", "metric": "sdc_replay_mismatch"},
        {"kind": "report", "key": "report:1", "metrics": ["sdc_divergent_tensors", "sdc_x"]},
        {"kind": "alarm", "key": "alarm:2", "metric": "sdc_replay_mismatch"},
    ]
    item = {**stored(evidence=evidence), "metrics": ["kept_by_hand"]}

    incident = Incident.from_record(item)

    assert incident.metrics == ["sdc_replay_mismatch", "sdc_divergent_tensors", "sdc_x"]
    assert incident.to_record()["metrics"] == incident.metrics


def test_the_outcome_is_the_closed_state_and_none_while_open():
    item = {**stored(), "outcome": "rejected"}

    assert Incident.from_record(item).outcome is None
    closed = Incident.from_record({**item, "state": "replaced_by_hyperpod", "closed_at": LATER})
    assert closed.outcome == "replaced_by_hyperpod"
    assert closed.to_record()["outcome"] == "replaced_by_hyperpod"
