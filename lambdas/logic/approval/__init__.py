"""Human approval, one module per job:

- `request`: the waiting remediation task asks (`request_approval`): its token kept, the
  incident judged, the approval card published (`send_card`; `resend_card` when it never
  went out).
- `decide`: a decision arrives from the approval state machine (`decide`): bound to its
  approval execution, checked, its principal established by AWS, counted, then the waiting
  task answered (SendTaskSuccess, written ahead and settled).
- `reset`: decision `reset` lifts a storm hold.
- `proceed`: decision `proceed` lets a job-level incident the guard held be health-checked.
- `page`: the dashboard's page of the open incidents (`incidents_page`).
`replies` is what the three kinds of decision share when they do not act (yet): an approval
counted towards `approvals_required`, or a refusal.

The walk "what happens when an approval arrives": `lambdas/handlers/decide.py` →
`decide.py` (top to bottom) → `replies.py` (counted, refused) → `safety/decisions.py` (which
decisions are accepted) → `safety/approvers.py` (who counts as whom, the tally per round).
"""

from __future__ import annotations

from sdc_remediation.lambdas.logic.approval.decide import decide
from sdc_remediation.lambdas.logic.approval.page import incidents_page
from sdc_remediation.lambdas.logic.approval.request import request_approval, resend_card, send_card

__all__ = ["decide", "incidents_page", "request_approval", "resend_card", "send_card"]
