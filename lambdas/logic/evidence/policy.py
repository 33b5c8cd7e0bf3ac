"""The decision table, as data: what the pipeline does with an incident before anyone decides
(`Course`), what it recommends (`Advice`), and why, for every kind of evidence.

Each row is keyed by the evidence's kind, where it localises the fault (`Where`), what
corroborates it (`Backing`), and, for the rows that adjust a judgement, the health check's
result or the node's history (`Adjusts`). Nothing else in the pipeline decides a course or an
advice: `recommendation` reads evidence into rows (`assess_*`, `recommend`, `course_of`); the
opening and the isolation step act on `course_of`; the approval card, notices and commands
word the `Recommendation` the rows produced; the state machine's Choice states compare the
`Decision` members an advice is carried out by (`DECISION_OF`).

How the rows combine (`recommendation.recommend`): the strongest advice among an incident's
reports wins; hardware alerts with SDC evidence make it one tier stronger; then the adjusting
rows apply in their order here (a recurrence or history turns a transient fault into a
replacement; unconfirmed claims cap it at a health check; a failed deep health check, HyperPod's
own finding, proposes replacing all the same; a node already rebooted is not offered another
reboot). Courses combine the same way: the strongest wins, and any evidence beyond the training
watch's acts (`Row.BEYOND_THE_WATCH`).

A hang is localised only with `MIN_AGREEING_SIGNALS` agreeing signals (the hang's own and the
node's hardware signals): the emitter names the ranks on the instance its watch localised
(`trainer_emitter.mapping.Attribution`, roles only), and this table decides whether that is
enough to act.
"""

from __future__ import annotations

from enum import Enum, StrEnum
from typing import Final

from sdc_remediation.lambdas.models.payloads import Decision
from sdc_remediation.lambdas.models.recommendation import Advice, Course

MIN_AGREEING_SIGNALS: Final = 2
"""Independent signals that must agree before a hang is localised to an instance (Baidu's
rule: "hang" only when two or more agree)."""

DECISION_OF: Final = {Advice.REPLACE: Decision.APPROVE, Advice.REBOOT: Decision.REBOOT}
"""The approver's decision that carries out an advice (a health check only proposes none)."""


class Kind(StrEnum):
    """The kind of evidence a row reads."""

    RING = "ring replay comparisons"
    WEIGHTS = "weight copies"
    VERDICT_PERSISTENT = "persistent verdict"
    VERDICT_REPLAYER = "replayer verdict"
    VERDICT_TRANSIENT = "transient verdict"
    VERDICT_UNATTRIBUTABLE = "unattributable verdict"
    NONFINITE = "non-finite gradient"
    REDUCED_GRADIENT = "non-finite reduced gradient"
    REPORT = "an SDC report"
    ALARM = "an alarm without a report"
    HANG = "hang"
    STRAGGLER = "straggler"
    HARDWARE = "hardware alert"
    SWEEP = "a deep health check an idle sweep ran"
    JUDGEMENT = "the judgement so far"


class Where(StrEnum):
    """Where the evidence localises the fault."""

    THIS_INSTANCE = "on this instance"
    ELSEWHERE = "on another instance"
    NOWHERE = "on no instance for certain"
    ANY = "wherever"


class Backing(StrEnum):
    """What corroborates the evidence."""

    NONE = "nothing"
    AGREEING_SIGNALS = "enough agreeing signals"
    HARDWARE = "a hardware signal"
    CRITICAL = "memory that cannot repair itself"
    REPEATED = "the same alert again"
    ANY = "whatever"


class Adjusts(StrEnum):
    """What an adjusting row looks at besides the evidence: the health check or the history."""

    NOTHING = "-"
    HISTORY = "the node's history"
    RECURRENCE = "a recurrence in this incident"
    UNCONFIRMED = "claims not confirmed"
    HEALTH_FAILED = "the deep health check failed"
    REBOOTED = "the node was rebooted in this incident"
    SCOPE = "a job-level incident"
    REPEAT_OFFENDER = "a repeat offender (k incidents in the window)"


class Row(Enum):
    """One row of the decision table: (kind, where, backing, adjusts) → course, advice, the
    reason the card gives (`reason`, filled in with the evidence's particulars) and, for the
    training watch's rows, what the card says is done (`action`)."""

    # -- SDC reports (the in-training checks) --------------------------------------------------
    WEIGHTS_MINORITY_HERE = (
        (Kind.WEIGHTS, Where.THIS_INSTANCE, Backing.ANY, Adjusts.NOTHING),
        (Course.ACT, Advice.REPLACE),
        "weights: rank {ranks} differs from the majority copy",
    )
    WEIGHTS_NO_MAJORITY = (
        (Kind.WEIGHTS, Where.NOWHERE, Backing.ANY, Adjusts.NOTHING),
        (Course.ACT, Advice.HEALTH_CHECK_ONLY),
        "weights: no strict majority among replicas",
    )
    WEIGHTS_MINORITY_ELSEWHERE = (
        (Kind.WEIGHTS, Where.ELSEWHERE, Backing.ANY, Adjusts.NOTHING),
        (Course.ACT, Advice.HEALTH_CHECK_ONLY),
        "weights: the minority copy is on another instance",
    )
    REDUCED_GRADIENT = (
        (Kind.REDUCED_GRADIENT, Where.NOWHERE, Backing.ANY, Adjusts.NOTHING),
        (Course.ACT, Advice.HEALTH_CHECK_ONLY),
        "non-finite reduced gradient: names no rank",
    )
    RING_CULPRIT = (
        (Kind.RING, Where.THIS_INSTANCE, Backing.ANY, Adjusts.NOTHING),
        (Course.ACT, Advice.REPLACE),
        "rank {ranks} mismatched in both of its ring comparisons",
    )
    PERSISTENT = (
        (Kind.VERDICT_PERSISTENT, Where.THIS_INSTANCE, Backing.ANY, Adjusts.NOTHING),
        (Course.ACT, Advice.REPLACE),
        "persistent fault confirmed on {where}",
    )
    REPLAYER_WRONG = (
        (Kind.VERDICT_REPLAYER, Where.THIS_INSTANCE, Backing.ANY, Adjusts.NOTHING),
        (Course.ACT, Advice.REPLACE),
        "the replayer computed wrong: {where}",
    )
    TRANSIENT = (
        (Kind.VERDICT_TRANSIENT, Where.THIS_INSTANCE, Backing.ANY, Adjusts.NOTHING),
        (Course.ACT, Advice.REBOOT),
        "transient fault on {where}",
    )
    UNATTRIBUTABLE = (
        (Kind.VERDICT_UNATTRIBUTABLE, Where.NOWHERE, Backing.ANY, Adjusts.NOTHING),
        (Course.ACT, Advice.HEALTH_CHECK_ONLY),
        "unattributable mismatch involving {where}",
    )
    NONFINITE_WITHOUT_MISMATCH = (
        (Kind.NONFINITE, Where.THIS_INSTANCE, Backing.NONE, Adjusts.NOTHING),
        (Course.ACT, Advice.HEALTH_CHECK_ONLY),
        "non-finite gradient on rank {ranks} without a replay mismatch",
    )
    NO_RANK_HERE = (
        (Kind.REPORT, Where.NOWHERE, Backing.ANY, Adjusts.NOTHING),
        (Course.ACT, Advice.HEALTH_CHECK_ONLY),
        "the report names no rank on this instance for certain",
    )
    ALARM_ALONE = (
        (Kind.ALARM, Where.THIS_INSTANCE, Backing.ANY, Adjusts.NOTHING),
        (Course.ACT, Advice.HEALTH_CHECK_ONLY),
        "no SDC report for this instance: the alarm alone names no rank",
    )
    BEYOND_THE_WATCH = (
        (Kind.REPORT, Where.ANY, Backing.ANY, Adjusts.NOTHING),
        (Course.ACT, Advice.HEALTH_CHECK_ONLY),
        "evidence beyond the training watch's: the pipeline acts",
    )

    # -- the training watch (check `hang`, `straggler`) ----------------------------------------
    HANG_LOCALISED_BY_AGREEING_SIGNALS = (
        (Kind.HANG, Where.THIS_INSTANCE, Backing.AGREEING_SIGNALS, Adjusts.NOTHING),
        (Course.ACT, Advice.REBOOT),
        "hang localised to this instance, with a second independent signal agreeing",
        "isolate, health-check, reboot (replace on a repeat)",
    )
    HANG_AMBIGUOUS = (
        (Kind.HANG, Where.ANY, Backing.ANY, Adjusts.NOTHING),
        (Course.CHECK, Advice.HEALTH_CHECK_ONLY),
        "hang spanning instances, localised by one signal only, or naming no rank here",
        "notice and health check of the named nodes within the guard; nothing isolated, "
        "no recovery proposed",
    )
    STRAGGLER_CORROBORATED = (
        (Kind.STRAGGLER, Where.THIS_INSTANCE, Backing.HARDWARE, Adjusts.NOTHING),
        (Course.ACT, Advice.REBOOT),
        "straggler on this instance for k windows, with hardware corroboration",
        "isolate, health-check, reboot",
    )
    STRAGGLER_ALONE = (
        (Kind.STRAGGLER, Where.ANY, Backing.NONE, Adjusts.NOTHING),
        (Course.NOTICE, Advice.HEALTH_CHECK_ONLY),
        "straggler without hardware corroboration, or on several instances",
        "notice only: nothing isolated, no health check, no recovery proposed",
    )

    # -- hardware alerts (the GPU's own counters) ----------------------------------------------
    HARDWARE_CRITICAL = (
        (Kind.HARDWARE, Where.THIS_INSTANCE, Backing.CRITICAL, Adjusts.NOTHING),
        (Course.ACT, Advice.REPLACE),
        "{rules}: the GPU's memory cannot repair itself",
    )
    HARDWARE_REPEATED = (
        (Kind.HARDWARE, Where.THIS_INSTANCE, Backing.REPEATED, Adjusts.NOTHING),
        (Course.ACT, Advice.REPLACE),
        "{rules} fired again after it resolved: a repeat",
    )
    HARDWARE_WITH_HISTORY = (
        (Kind.HARDWARE, Where.THIS_INSTANCE, Backing.ANY, Adjusts.HISTORY),
        (Course.ACT, Advice.REPLACE),
        "hardware signal on a node with history: {count} past incident(s)",
    )
    HARDWARE_ALONE = (
        (Kind.HARDWARE, Where.THIS_INSTANCE, Backing.NONE, Adjusts.NOTHING),
        (Course.ACT, Advice.REBOOT),
        "a hardware signal alone: reboot, replace on a repeat",
    )

    # -- idle sweeps (HyperPod's deep health checks on nodes no job was using) ----------------
    SWEEP_FAILED = (
        (Kind.SWEEP, Where.THIS_INSTANCE, Backing.ANY, Adjusts.NOTHING),
        (Course.ACT, Advice.REPLACE),
        "idle sweep: {checks} failed on the idle node{seen}",
    )
    """No job ran there, so nothing of a job's software or data can explain it; it is HyperPod's
    own finding under load, which the table already takes as reason enough to propose replacing
    (a reboot clears neither a GPU that fails DCGM's diagnostics nor a link that fails NCCL and
    EFA tests under load, and rebooting first would return a suspect node to the idle pool
    unproven; the approver may still choose a reboot). Applied after the unconfirmed-claims row:
    never downgraded, as a failed health check is not."""

    # -- rows that adjust the judgement so far, in the order they apply ------------------------
    JOB_LEVEL = (
        (Kind.JUDGEMENT, Where.NOWHERE, Backing.ANY, Adjusts.SCOPE),
        (Course.ACT, Advice.HEALTH_CHECK_ONLY),
        "ambiguous alarm: the involved nodes are health-checked, no replacement proposed",
    )
    TRANSIENT_RECURRED = (
        (Kind.VERDICT_TRANSIENT, Where.THIS_INSTANCE, Backing.ANY, Adjusts.RECURRENCE),
        (Course.ACT, Advice.REPLACE),
        "the transient fault recurred ({count} reports)",
    )
    WATCH_REPEAT_WITH_HISTORY = (
        (Kind.HANG, Where.THIS_INSTANCE, Backing.ANY, Adjusts.HISTORY),
        (Course.ACT, Advice.REPLACE),
        "a repeat on a node with history: {count} past incident(s) ({ids})",
    )
    TRANSIENT_WITH_HISTORY = (
        (Kind.VERDICT_TRANSIENT, Where.THIS_INSTANCE, Backing.ANY, Adjusts.HISTORY),
        (Course.ACT, Advice.REPLACE),
        "transient fault on a node with history: {count} past incident(s) ({ids})",
    )
    REPEAT_OFFENDER = (
        (Kind.JUDGEMENT, Where.THIS_INSTANCE, Backing.ANY, Adjusts.REPEAT_OFFENDER),
        (Course.ACT, Advice.REPLACE),
        "repeat offender: {why}",
    )
    UNCONFIRMED = (
        (Kind.JUDGEMENT, Where.ANY, Backing.ANY, Adjusts.UNCONFIRMED),
        (Course.ACT, Advice.HEALTH_CHECK_ONLY),
        "what the reports claim about this node was not confirmed (CLAIMS NOT CONFIRMED): "
        "they propose nothing beyond a health check",
    )
    HEALTH_CHECK_FAILED = (
        (Kind.JUDGEMENT, Where.THIS_INSTANCE, Backing.ANY, Adjusts.HEALTH_FAILED),
        (Course.ACT, Advice.REPLACE),
        "the deep health check failed",
    )
    FAILED_AGAIN_AFTER_REBOOT = (
        (Kind.JUDGEMENT, Where.THIS_INSTANCE, Backing.ANY, Adjusts.REBOOTED),
        (Course.ACT, Advice.REPLACE),
        "the deep health check failed again after the reboot",
    )
    ALREADY_REBOOTED = (
        (Kind.VERDICT_TRANSIENT, Where.THIS_INSTANCE, Backing.ANY, Adjusts.REBOOTED),
        (Course.ACT, Advice.REPLACE),
        "the node was already rebooted in this incident: replace or reject",
    )

    def __init__(
        self,
        key: tuple[Kind, Where, Backing, Adjusts],
        outcome: tuple[Course, Advice],
        reason: str,
        action: str = "",
    ) -> None:
        self.kind, self.where, self.backing, self.adjusts = key
        self.course, self.advice = outcome
        self.reason = reason
        self.action = action

    @property
    def evidence(self) -> str:
        """The row's evidence as the card's table shows it (the reason, unfilled, for a watch
        row: it names no particulars)."""
        return self.reason

    @property
    def proposes_recovery(self) -> bool:
        """Its advice proposes more than a health check (a reboot or a replacement)."""
        return self.advice is not Advice.HEALTH_CHECK_ONLY

    def says(self, **particulars: object) -> str:
        """The row's reason with the evidence's particulars filled in."""
        return self.reason.format(**particulars) if particulars else self.reason


WATCH_KINDS: Final = (Kind.HANG, Kind.STRAGGLER)
WATCH_ROWS: Final = tuple(r for r in Row if r.kind in WATCH_KINDS and r.action)
"""The training watch's rows, as README's watch table shows them."""


def stronger(advice: Advice) -> Advice:
    """One tier stronger (SDC evidence and a hardware signal on the same node)."""
    return Advice.REBOOT if advice is Advice.HEALTH_CHECK_ONLY else Advice.REPLACE


def strongest(advices: list[Advice]) -> Advice:
    return max(advices, key=lambda a: a.strength)
