"""The pipeline's logic, stage by stage: no AWS SDK, only the ports (`ports.py`).

On top, one module per stage of the pipeline, in its order, holding what the Lambda handlers
call: `intake` (every trigger's one path: reports, alarms and hardware alerts in; a malformed
event refused), `isolation`, `health_check`,
`approval`, `recovery` (a reboot or a replacement: a package, its steps on top and the engine
that sends the requests beside them) and `closing` (with the reconciliation of
what nothing else moves); beside them, `sweep` (idle nodes health-checked on a schedule: a
package whose failed checks enter through the intake's opening); `ports.py` says what the logic needs from the outside world. The
machinery the stages share is in four folders, each saying what it holds. None of it imports a
stage, and each folder imports only those above it in this list:

- `core/`: the step every handler runs as, identifiers, states and transitions, the audit log;
- `evidence/`: what an approver weighs, gathered and judged once (the stored recommendation);
- `safety/`: what keeps the pipeline from acting wrongly or widely (guard, accepted decisions);
- `opening/`: how a claim becomes an incident (or is held).

How it is all put to people (cards, notices, chat) is `sdc_remediation.lambdas.wording`: it reads the incident
record only, and `core/` and `evidence/` import none of it.

`STAGES` below is the map from each handler to the function it calls and the state-machine
states that invoke it (a test holds it against the handlers and the synthesized definitions),
so a reader follows a trigger from its handler to its function, and an opened incident's
execution from state to function, without opening the handlers or the state-machine
definitions. An opened incident's remediation execution (`opening.execution`) calls
`isolate_node` first (IsolateNode: the node is cordoned, or drained on Slurm, when its course
says act), then the health check's, then asks for approval:

| handler                | function                           | invoked by                      |
|------------------------|------------------------------------|---------------------------------|
| `store_report`         | `intake.store_report`              | an SDC report (EventBridge)     |
| `open_incident`        | `intake.open_incident`             | a contributor alarm             |
| `isolate_node`         | `isolation.isolate_node`           | IsolateNode                     |
| `start_health_check`   | `health_check.start_health_check`  | StartHealthCheck                |
| `check_health`         | `health_check.check_health`        | CheckHealth                     |
| `request_approval`     | `approval.request_approval`        | RequestApproval (task token)    |
| `decide`               | `approval.decide`                  | Decide (approval state machine) |
| `incidents_page`       | `approval.incidents_page`          | the dashboard's custom widget   |
| `reboot_node`          | `recovery.reboot_node`             | RebootNode                      |
| `check_reboot`         | `recovery.check_reboot`            | CheckReboot                     |
| `replace_node`         | `recovery.replace_node`            | ReplaceNode                     |
| `check_replacement`    | `recovery.check_replacement`       | CheckReplacement                |
| `close_incident`       | `closing.close_incident`           | every Close* state              |
| `reconcile`            | `closing.reconcile`                | a schedule, `sdc reconcile`     |
| `verify_audit`         | `core.audit_check.check_audit`     | a schedule                      |
| `sweep_idle`           | `sweep.sweep`                      | a schedule per swept cluster    |

A malformed event is refused by the intake handlers with `intake.refuse`.
"""

from __future__ import annotations

from typing import Final, NamedTuple


class Stage(NamedTuple):
    handler: str
    """The module under `lambdas/handlers/` (also the function's name in the stack)."""
    function: str
    """`module:function`, the module relative to `sdc_remediation.lambdas.logic`."""
    states: tuple[str, ...]
    """The state-machine states that invoke the handler; empty: an event or a schedule does."""


STAGES: Final = (
    Stage("store_report", "intake:store_report", ()),
    Stage("open_incident", "intake:open_incident", ()),
    Stage("isolate_node", "isolation:isolate_node", ("IsolateNode",)),
    Stage("start_health_check", "health_check:start_health_check", ("StartHealthCheck",)),
    Stage("check_health", "health_check:check_health", ("CheckHealth",)),
    Stage("request_approval", "approval:request_approval", ("RequestApproval",)),
    Stage("decide", "approval:decide", ("Decide",)),
    Stage("incidents_page", "approval:incidents_page", ()),
    Stage("reboot_node", "recovery:reboot_node", ("RebootNode",)),
    Stage("check_reboot", "recovery:check_reboot", ("CheckReboot",)),
    Stage("replace_node", "recovery:replace_node", ("ReplaceNode",)),
    Stage("check_replacement", "recovery:check_replacement", ("CheckReplacement",)),
    Stage(
        "close_incident",
        "closing:close_incident",
        (
            "CloseReplaced",
            "CloseRebooted",
            "CloseRejected",
            "CloseExpired",
            "CloseHeld",
            "CloseChecked",
            "CloseReplacedByHyperPod",
            "CloseFailed",
        ),
    ),
    Stage("reconcile", "closing:reconcile", ()),
    Stage("verify_audit", "core.audit_check:check_audit", ()),
    Stage("sweep_idle", "sweep:sweep", ()),
)
