"""The rate bound: how many incidents reports and hardware alerts may open on a cluster, and
for one job, in one minute of the pipeline's clock.

Every report is a claim by an unauthenticated party (a training pod needs nothing but the
training policy to send one), and each opening costs a record, an audit entry and maybe a
notice. The storm rule counts only confirmed nodes and the guard only what stays open; this
bound counts openings. It is spent on the intake's BUDGET stage, after the CONFIRM stage, so
only an opening whose node HyperPod and the orchestrator confirmed spends it: forged reports
naming made-up instances, under any job names, spend nothing, and a genuine report in the same
minute still acts. Each opening a confirmed claim asks for (a new incident, not an attachment
or a redelivery) adds one to its job's tally for the minute it is received, when the report
names a job (`JOB_OPENINGS_PER_MINUTE`), and, unless that refuses it, to its cluster's
(`REPORT_OPENINGS_PER_MINUTE`: one job's flood leaves the others room): an atomic counter per
(cluster, minute) in the guard store, so concurrent invocations each see a distinct count, kept
an hour past its minute (TTL).

Beyond either bound the incident is recorded `held` (`HoldKind.RATE`): nothing acts, its
`incident_held` entry audits the refused opening, and only the cluster's first rate-held
incident of the minute is notified (that notice says the others are held silently). A
rate-held incident enters no node's history, and its held lock lasts its minute only:
afterwards a new trigger for the node is judged afresh.

Contributor alarms are not counted: CloudWatch raises them, the training policy cannot, and a
report flood must not hold a genuine alarm (`sdc_remediation.lambdas.models.claim.SPENDS`). The
minute is the pipeline's receive time, never a time the reporter sets.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta

from sdc_remediation.lambdas.logic.core.steps import Step
from sdc_remediation.lambdas.logic.safety.guard import Blocker
from sdc_remediation.lambdas.models.guard import HoldKind

WINDOW_SECONDS = 60
TALLY_TTL = timedelta(hours=1)
"""How long after its minute a tally is kept before DynamoDB's TTL deletes it."""


def minute(step: Step) -> int:
    """The window now: minutes since the epoch, by the pipeline's clock."""
    return int(step.deps.clock.now().timestamp()) // WINDOW_SECONDS


def take(step: Step, cluster_name: str, job_name: str | None) -> Blocker | None:
    """Count one opening on the cluster (and the job); a Blocker when it is over a bound."""
    deps = step.deps
    settings = deps.settings
    window = minute(step)
    expires_at = (window + 1) * WINDOW_SECONDS + int(TALLY_TTL.total_seconds())
    reason = None
    if job_name:
        # The job's first: an opening its job's bound refuses takes nothing of the cluster's,
        # so one job's flood leaves the rest of the cluster's bound to the other jobs.
        job = deps.guard.tally(cluster_name, f"job#{_job_key(job_name)}#{window}", expires_at)
        if job > settings.job_openings_per_minute:
            reason = (
                f"rate bound: opening {job} from reports of job {job_name[:60]!r} on cluster "
                f"{cluster_name} within this minute, at most "
                f"{settings.job_openings_per_minute} (JOB_OPENINGS_PER_MINUTE)"
            )
    if reason is None:
        opened = deps.guard.tally(cluster_name, f"opened#{window}", expires_at)
        if opened > settings.report_openings_per_minute:
            reason = (
                f"rate bound: opening {opened} from reports on cluster {cluster_name} within "
                f"this minute, at most {settings.report_openings_per_minute} "
                "(REPORT_OPENINGS_PER_MINUTE)"
            )
    if reason is None:
        return None
    first = deps.guard.tally(cluster_name, f"held#{window}", expires_at) == 1
    return Blocker(
        HoldKind.RATE,
        f"{reason}; held once its node was confirmed, before anything acted",
        window_notice=first,
    )


def held_this_minute(step: Step, closed_at: str | None) -> bool:
    """Whether a rate-held incident (closed at birth at `closed_at`) was held in this minute."""
    if not closed_at:
        return False
    held = int(datetime.fromisoformat(closed_at).timestamp()) // WINDOW_SECONDS
    return held == minute(step)


def _job_key(job_name: str) -> str:
    """A fixed-length key for the job name a reporter chose (any length, any character)."""
    return hashlib.sha256(job_name.encode()).hexdigest()[:32]
