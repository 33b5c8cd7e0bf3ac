"""What people read: the approval card and the notices (plain text for SNS e-mail).

Each message is built as data, a subject and its sections, and `render` is the one place that
turns sections into the text that goes out. The approval card names its sections, so `sdc show`
prints the ones it needs without reading the text back.

The approval card carries the evidence (metric, step, ranks, verdicts, suspect window), the deep
health check status, the advice from the decision table, what to do, and the exact JSON to paste
into the approval state machine. It never carries the task token: that stays in the incident
record, readable only by the functions. How each recorded part of an incident reads:
lambdas/wording/card_lines.py.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from sdc_remediation.lambdas.models.console import console_link
from sdc_remediation.lambdas.models.guard import ClusterHold, HoldKind
from sdc_remediation.lambdas.models.incident import Incident
from sdc_remediation.lambdas.models.payloads import Decision
from sdc_remediation.lambdas.models.recommendation import Course
from sdc_remediation.lambdas.models.recovery import MAX_REBOOTS
from sdc_remediation.lambdas.models.settings import Settings
from sdc_remediation.lambdas.wording import card_lines
from sdc_remediation.lambdas.wording.card_lines import approval_rule_lines, wrap
from trainer_emitter.contract import SDC_METRICS, Metric

SUBJECT_LIMIT = 100  # SNS: at most 100 printable ASCII characters
MESSAGE_MAX_BYTES = 200_000
"""The most text a card or notice carries: SNS takes at most 256 KB per message, and the
protocols that wrap it (e-mail JSON, HTTPS, chat) need room of their own."""
COMMENT_PLACEHOLDER = "<why>"
"""The same placeholder the waiting state's `approval_input` hint shows."""


@dataclass(frozen=True, slots=True)
class Section:
    """One paragraph: its heading (`NODE`, `EVIDENCE`...; None when the paragraph has none)
    and the lines under it. An empty line is a blank line inside the paragraph."""

    heading: str | None
    lines: Sequence[str] = ()


def render(sections: Iterable[Section]) -> str:
    """The text that goes out: each section's heading and lines, a blank line between them."""
    return "\n\n".join(
        "\n".join(s.lines if s.heading is None else (s.heading, *s.lines)) for s in sections
    )


@dataclass(frozen=True, slots=True)
class Card:
    """A notice: its subject and sections."""

    subject: str
    sections: tuple[Section, ...]

    @property
    def text(self) -> str:
        return render(self.sections)


@dataclass(frozen=True, slots=True)
class ApprovalCard:
    """The approval request, section by section. The text shows them in `sections` order: the
    five lines an approver decides from, then the evidence, then the raw values."""

    subject: str
    summary: Section
    """The first five lines: what is suspected, where, the recommendation, the deadline (in the
    approvers' time zone and UTC), how to decide."""
    node: Section
    isolation: Section
    evidence: Section
    hardware_alerts: Section | None
    """The hardware alerts attached to the incident, firing or resolved (None: none)."""
    claims: Section | None
    """What the reports claim that the checks did not confirm (None: all confirmed)."""
    health_check: Section
    hyperpod: Section
    """HyperPod's own events for the instance, and its node's HyperPod labels."""
    telemetry: Section
    history: Section
    recommendation: Section
    """The advice as its heading, its reasons and the checkpoint to resume from (the card
    shows the heading in its summary and these lines under WHY)."""
    what_to_do: Section
    raw: Section
    """The raw values, last: the alarms' own text, the GPU UUIDs and report ids."""
    dry_run: Section | None
    inputs: Mapping[Decision, Mapping[str, str]]
    """The approval state machine inputs the card offers, by decision, in the card's order."""
    approval_state_machine_arn: str | None = None
    needs_identity_proof: bool = False
    """Whether a decision must be signed (`sdc`): a console or chat start is refused."""

    @property
    def sections(self) -> tuple[Section, ...]:
        """The sections the card shows, in order; one with a heading and nothing under it is
        left out (the dry-run line is all heading)."""
        return tuple(s for s in self._all_sections() if s.lines or s is DRY_RUN)

    def _all_sections(self) -> tuple[Section, ...]:
        return (
            self.summary,
            *([self.dry_run] if self.dry_run else []),
            Section(WHY_HEADING, self.recommendation.lines),
            self.node,
            self.isolation,
            self.evidence,
            *([self.hardware_alerts] if self.hardware_alerts else []),
            *([self.claims] if self.claims else []),
            self.health_check,
            self.hyperpod,
            self.telemetry,
            self.history,
            self.what_to_do,
            self.raw,
        )

    @property
    def text(self) -> str:
        return render(self.sections)


SUMMARY_LINES: Final = 5
"""The card's summary: what, where, the recommendation, the deadline, how to decide."""
WHY_HEADING: Final = "WHY (the evidence behind the recommendation)"
RAW_HEADING: Final = "RAW VALUES (the alarms' own text, GPU UUIDs, report ids)"


HYPERPOD_HEADING = "HYPERPOD (its own events for this instance, and the node's labels)"

DRY_RUN = Section("DRY RUN: an approval is recorded as 'would replace'; no node is replaced.")
"""The card's last section when the deployment is a dry run."""


def approval_input(incident_id: str, decision: Decision) -> dict[str, str]:
    """The approval state machine's input, exactly as it is to be pasted."""
    return {"incident_id": incident_id, "decision": decision.value, "comment": COMMENT_PLACEHOLDER}


def reboot_offered(incident: Incident) -> bool:
    """Whether the incident's recovery path still allows a reboot: not once it has had
    `MAX_REBOOTS` (then `decide` refuses one: replace or reject). The card, `sdc show` and the
    dashboard's page offer the reboot by this one rule."""
    return incident.reboots < MAX_REBOOTS


def approval_card(
    incident: Incident,
    settings: Settings,
    *,
    max_bytes: int | None = MESSAGE_MAX_BYTES,
) -> ApprovalCard:
    """The approval card, at most `max_bytes` of text (None: unbounded, as `sdc show` prints
    it), worded from the record: its recommendation and history are the incident's stored
    `recommendation`, judged once (`sdc_remediation.lambdas.logic.evidence.recommendation.judge`). A card too large shows the newest reports that fit and names how many more there are
    (`sdc show` lists them all); if even the fixed parts leave too little room, its variable
    sections are cut to fit, or, where not even their headings fit, left out for one line naming
    `sdc show`. The summary, the recommendation and WHAT TO DO are never cut.

    The first five lines are what an approver decides from (`SUMMARY_LINES`): what is
    suspected, where, the recommendation, the deadline, how to decide; the evidence follows; the
    raw values (the alarms' own text, GPU UUIDs) and the JSON inputs come last."""
    card = _approval_card(incident, settings, None)
    if max_bytes is None or _size(card) <= max_bytes:
        return card
    shown = len(card_lines.shown_reports(incident))
    while shown > 0 and _size(card) > max_bytes:
        shown -= 1
        card = _approval_card(incident, settings, shown)
    if _size(card) <= max_bytes:
        return card
    return _cut_to_fit(card, max_bytes, incident.incident_id)


def _size(card: ApprovalCard | Card) -> int:
    return len(card.text.encode())


def _cut_to_fit(card: ApprovalCard, max_bytes: int, incident_id: str) -> ApprovalCard:
    """Every variable section cut to an equal share of what the fixed parts leave."""
    empty = Section(None)
    fixed = dataclasses.replace(
        card,
        node=empty,
        isolation=empty,
        evidence=empty,
        hardware_alerts=None,
        claims=None,
        health_check=empty,
        telemetry=empty,
        history=empty,
        raw=empty,
    )
    share = max((max_bytes - _size(fixed)) // _CUT_SECTIONS - 200, 0)
    see = f"  ... cut to fit: `sdc show {incident_id}`"

    def cut(section: Section) -> Section:
        kept: list[str] = []
        used = len((section.heading or "").encode())
        for line in section.lines:
            used += len(line.encode()) + 1
            if used > share:
                kept.append(see)
                break
            kept.append(line)
        return Section(section.heading, tuple(kept))

    shares = dataclasses.replace(
        card,
        node=cut(card.node),
        isolation=cut(card.isolation),
        evidence=cut(card.evidence),
        hardware_alerts=cut(card.hardware_alerts) if card.hardware_alerts else None,
        claims=cut(card.claims) if card.claims else None,
        health_check=cut(card.health_check),
        telemetry=cut(card.telemetry),
        history=cut(card.history),
        raw=cut(card.raw),
    )
    if _size(shares) <= max_bytes:
        return shares
    # not even each section's heading fits: one line says where the evidence is
    return dataclasses.replace(fixed, evidence=Section("EVIDENCE", (see,)))


_CUT_SECTIONS: Final = 9
"""The sections `_cut_to_fit` shares the room among: node, isolation, evidence, hardware alerts,
claims, health check, telemetry, history, raw values."""


_SUSPICIONS: Final = (
    (SDC_METRICS, "silent data corruption"),
    ((Metric.HANG,), "a training hang"),
    ((Metric.STRAGGLER,), "a straggler"),
)


def suspected(incident: Incident) -> str:
    """What the incident's evidence suspects, as the card's first line (WHAT) says it: silent
    data corruption, a training hang, a straggler, failing hardware (the cluster's hardware
    alerts, or a deep health check an idle sweep ran that failed), or several of them; silent data corruption when its evidence names none of them
    (an alarm the record could not attribute)."""
    metrics = set(incident.metrics)
    named = [what for kinds, what in _SUSPICIONS if metrics & {m.value for m in kinds}]
    if incident.hardware or incident.sweeps:
        named.append("failing hardware")
    return " and ".join(named) or "silent data corruption"


def _approval_card(
    incident: Incident, settings: Settings, shown_reports: int | None
) -> ApprovalCard:
    rebooted = incident.reboots > 0
    verb = "replacing" if rebooted else "rebooting or replacing"
    reboot = (Decision.REBOOT,) if reboot_offered(incident) else ()
    inputs = {
        decision: approval_input(incident.incident_id, decision)
        for decision in (*reboot, Decision.APPROVE, Decision.REJECT)
    }
    return ApprovalCard(
        subject=_subject(f"SDC: approve {verb} {incident.instance_id} on {incident.cluster_name}?"),
        summary=_summary(incident, settings, inputs),
        node=Section(
            "NODE",
            (
                f"  instance group: {incident.instance_group or 'unknown'}; "
                f"status when opened: {incident.node_status or 'unknown'}; "
                f"NodeRecovery: {incident.node_recovery or 'unknown'}",
                *card_lines.recovery_lines(incident),
            ),
        ),
        isolation=Section("ISOLATION", card_lines.isolation_lines(incident)),
        evidence=Section(
            "EVIDENCE",
            wrap(
                (
                    *card_lines.metric_lines(incident),
                    *card_lines.alarm_lines(incident),
                    *card_lines.report_lines(incident, shown_reports),
                )
            ),
        ),
        hardware_alerts=(
            Section(card_lines.HARDWARE_ALERTS_HEADING, wrap(hardware))
            if (hardware := card_lines.hardware_alert_lines(incident))
            else None
        ),
        claims=(
            Section(
                "CLAIMS NOT CONFIRMED (never acted on; the reports propose nothing beyond a "
                "health check)",
                wrap(card_lines.unconfirmed_lines(incident)[1:]),
            )
            if incident.unconfirmed
            else None
        ),
        health_check=Section("DEEP HEALTH CHECK", card_lines.health_lines(incident)),
        hyperpod=Section(
            HYPERPOD_HEADING,
            tuple(f"  {line}" for line in card_lines.hyperpod_panel(incident.hyperpod)),
        ),
        telemetry=Section(
            "HARDWARE TELEMETRY (the GPU's own counters, from dcgm-exporter)",
            card_lines.telemetry_lines(incident),
        ),
        history=Section(
            "HISTORY (past incidents of this instance and of its GPUs)",
            card_lines.history_lines(incident.recommendation),
        ),
        recommendation=Section(
            card_lines.recommendation_heading(incident.recommendation),
            (
                *wrap(card_lines.reason_lines(incident.recommendation)),
                *card_lines.resume_lines(incident),
            ),
        ),
        what_to_do=_what_to_do(
            settings.approval_state_machine_arn, inputs, approval_rule_lines(settings, incident)
        ),
        raw=Section(
            RAW_HEADING,
            (
                *card_lines.alarm_text_lines(incident),
                *card_lines.gpu_uuid_lines(incident, shown_reports),
            ),
        ),
        dry_run=DRY_RUN if settings.dry_run else None,
        inputs=inputs,
        approval_state_machine_arn=settings.approval_state_machine_arn,
        needs_identity_proof=settings.needs_identity_proof,
    )


def _summary(
    incident: Incident, settings: Settings, inputs: Mapping[Decision, Mapping[str, str]]
) -> Section:
    """The card's first five lines: what, where, the recommendation (the stored one, as its
    heading), the deadline, how to decide."""
    rules = sorted({str(item.rule) for item in incident.hardware})
    swept = sorted({f"{c} failed on the idle node" for i in incident.sweeps for c in i.checks})
    metrics = ", ".join([*incident.metrics, *rules, *swept]) or "no metric recorded"
    decisions = "|".join(decision.value for decision in inputs)
    command = f"sdc {decisions} {incident.incident_id} -m '<why>'"
    how = (
        f"HOW: {command} (it signs who you are; a console approval is refused)"
        if settings.needs_identity_proof
        else f"HOW: {command}, or the approval state machine with an input under WHAT TO DO"
    )
    return Section(
        None,
        (
            f"WHAT: {suspected(incident)} suspected on {incident.target} ({metrics})",
            f"WHERE: cluster {incident.cluster_name}, instance group "
            f"{incident.instance_group or 'unknown'}; incident {incident.incident_id}",
            card_lines.recommendation_heading(incident.recommendation),
            card_lines.deadline_line(incident),
            how,
        ),
    )


def _what_to_do(
    arn: str | None,
    inputs: Mapping[Decision, Mapping[str, str]],
    rules: tuple[str, ...] = (),
) -> Section:
    """Where to decide, the input of each decision the card offers, and who may decide."""
    approve = json.dumps(inputs[Decision.APPROVE])
    return Section(
        "WHAT TO DO",
        (
            "  Review the evidence, then start an execution of the approval state machine",
            f"  {arn or '(APPROVAL_STATE_MACHINE_ARN not configured)'}",
            *([f"  console: {link}"] if (link := console_link(arn)) else []),
            "  with one of these inputs (replace the comment with your reason):",
            "",
            *_reboot_choice(inputs.get(Decision.REBOOT)),
            "  To approve replacing the node (a new instance; "
            "this one's volumes are destroyed, tens",
            "  of minutes):",
            f"    {approve}",
            "",
            "  To reject (nothing is replaced):",
            f"    {json.dumps(inputs[Decision.REJECT])}",
            "",
            "  From a shell:",
            f"    aws stepfunctions start-execution --state-machine-arn {arn or '<approval arn>'} "
            f"--input '{approve}'",
            *rules,
        ),
    )


def _reboot_choice(reboot_input: Mapping[str, str] | None) -> tuple[str, ...]:
    """The reboot choice, or why it is no longer offered."""
    if reboot_input is None:
        return (
            "  A reboot is no longer offered: the node was rebooted in this incident and its",
            "  deep health check ran again (above).",
            "",
        )
    return (
        "  To reboot the node (same instance and volumes, minutes; it stays isolated, is",
        "  health-checked again and released if that passes; if not, you are asked again):",
        f"    {json.dumps(reboot_input)}",
        "",
    )


HELD_NOTICE_REPORTS = 3
"""A held notice shows the newest reports only; `sdc show` lists them all."""


def held_notice(incident: Incident) -> Card:
    """A new incident recorded as held (paused, muted, or the blast-radius guard is full), or as
    notice only (the decision table's row for its evidence)."""
    hold = incident.hold
    notice = incident.hold_kind == HoldKind.NOTICE
    subject = _subject(
        f"SDC: notice only for {incident.target}: {suspected(incident)}, nothing acts"
        if notice
        else f"SDC: incident on {incident.target} held ({incident.hold_kind}), nothing acts"
    )
    what = (
        f"Incident {incident.incident_id} on cluster {incident.cluster_name} was recorded as "
        + (
            f"NOTICE ONLY: {Course.NOTICE.value.removeprefix('notice only: ')}; no approval "
            "request."
            if notice
            else "HELD: no health check, no approval request, no replacement."
        ),
        *(
            card_lines.notice_why_lines(incident)
            if notice
            else (f"Why: {(hold and hold.reason) or incident.reason}",)
        ),
        f"Metrics: {', '.join(incident.metrics) or 'none'}",
        *(
            card_lines.job_node_lines(incident)
            if incident.is_job
            else card_lines.unconfirmed_lines(incident)
        ),
        *card_lines.report_lines(incident, HELD_NOTICE_REPORTS),
    )
    next_steps: tuple[str, ...]
    if incident.hold_kind == HoldKind.PAUSED:
        next_steps = ("Unpause (set the pause switch to false); the next alarm acts again.",)
    elif hold is not None and hold.kind == HoldKind.MUTED:
        rule = hold.mute_rule
        next_steps = (
            f"The alarm's actions are muted by CloudWatch alarm mute rule {rule} "
            f"({hold.mute_rule_arn}) until {hold.mute_window_end}.",
            "This pipeline is one of those actions: a muted alarm is held, as if paused.",
            "This incident stays held; after the mute window the next alarm on this node acts.",
            "If the mute is wrong, end it: CloudWatch console, Alarms, Mute rules, or",
            f"  aws cloudwatch delete-alarm-mute-rule --alarm-mute-rule-name {rule}",
        )
    elif incident.is_job and incident.hold_kind == HoldKind.GUARD:
        proceed = json.dumps(approval_input(incident.incident_id, Decision.PROCEED))
        next_steps = (
            "Every node a job-level incident would cordon or health-check counts against the "
            "blast-radius guard (sdc:guardMaxOpenNodes, sdc:guardMaxOpenPercent); these do "
            "not fit.",
            "Nothing was cordoned or health-checked. An alarm on one of these nodes is not "
            "absorbed by this incident: it opens its own (within the guard).",
            "If the report is genuine and these nodes are to be health-checked all at once, let "
            "it proceed (audited, as a storm reset is): start an execution of the approval state "
            "machine with",
            f"    {proceed}",
            f'or from a shell: sdc proceed {incident.incident_id} -m "<why>"',
            "A new job-level incident then health-checks the nodes HyperPod still knows; they "
            "count against the guard until it closes.",
        )
    elif notice:
        next_steps = tuple(
            wrap(
                (
                    "If the node's hardware corroborates it later (a hardware alert of the "
                    "workspace's rules: clock throttling, an XID), or an SDC check names the "
                    "node, that opens the node's incident on the normal path: isolated, "
                    "health-checked, a recovery proposed.",
                    "Another straggler report or alarm for this node joins this notice within "
                    "the hold window (sdc:stormWindowSeconds); after it, the next one is judged "
                    "afresh.",
                )
            )
        )
    elif incident.hold_kind == HoldKind.RATE:
        next_steps = (
            "Reports or alerts asked to open more incidents on this cluster within one minute "
            "than the "
            "rate bound allows (sdc:reportOpeningsPerMinute per cluster, "
            "sdc:jobOpeningsPerMinute per job).",
            "This is the minute's only notice: every other incident the bound holds on this "
            "cluster in this minute is recorded held, and audited, without a notice of its own "
            "(sdc incidents --state held).",
            "It was held once HyperPod and the orchestrator had confirmed its node (nothing "
            "unconfirmed spends the bound), and nothing acts. Contributor alarms are "
            "not bounded: a genuine alarm on a node still opens its incident; a report received "
            "after this minute is judged afresh.",
        )
    else:
        next_steps = (
            "The cluster already has as many open incidents as its blast-radius guard allows. "
            "When they close, the next alarm on this node opens an incident that acts.",
        )
    return Card(
        subject,
        (
            Section(None, wrap(what)),
            Section(None, (*next_steps, "The audit log holds this incident's record.")),
        ),
    )


def storm_notice(hold: ClusterHold, settings: Settings, open_ids: Sequence[str]) -> Card:
    """The one notification of a storm hold: why, what is held, how to reset it."""
    reset = json.dumps(
        {"incident_id": hold.hold_id, "decision": "reset", "comment": COMMENT_PLACEHOLDER}
    )
    arn = settings.approval_state_machine_arn
    everything = hold.trusted_at is not None
    subject = _subject(
        f"SDC: storm on {hold.cluster_name}: "
        + ("every incident held" if everything else "reports and alarms held")
    )
    why = (
        f"Storm hold {hold.hold_id} on cluster {hold.cluster_name}.",
        f"Why: {hold.reason}.",
        f"Instances flagged: {', '.join(hold.instances)}",
    )
    held = (
        "Everything in this cluster is held:" if everything else "Reports and alarms are held:",
        "new incidents are recorded as held (without a notification each), open incidents stop",
        "before their next health check, approval request or replacement.",
        *(
            ()
            if everything
            else (
                "But hardware alerts and failed idle-sweep checks still act, and so do the",
                "incidents holding one (no training pod can send them), unless they alone flag",
                f"{hold.threshold} instances within {hold.window_seconds} s: then they are held too.",
            )
        ),
        f"Incidents open now: {', '.join(open_ids) or 'none'}",
    )
    how_to_reset = (
        "Fix the job or recipe first. Then reset the hold, the same way as an approval: start an",
        f"execution of the approval state machine {arn or '(APPROVAL_STATE_MACHINE_ARN not set)'}",
        *([f"  console: {link}"] if (link := console_link(arn)) else []),
        "with this input (replace the comment with your reason):",
        f"    {reset}",
        f'or from a shell: sdc reset {hold.hold_id} -m "<why>"',
        "The reset is audited; flags from before it no longer count towards a storm.",
    )
    return Card(subject, (Section(None, why), Section(None, held), Section(None, how_to_reset)))


def hold_lifted_notice(hold: ClusterHold) -> Card:
    subject = _subject(f"SDC: storm hold on {hold.cluster_name} reset")
    lines = (
        f"Storm hold {hold.hold_id} on cluster {hold.cluster_name} was reset at {hold.lifted_at}",
        f"by {hold.lifted_by}: {hold.comment or 'no comment'}.",
        "New alarms on this cluster open incidents that act again.",
    )
    return Card(subject, (Section(None, lines),))


def close_notice(incident: Incident) -> Card:
    dry_run = incident.dry_run
    label = f"{incident.state}{' (dry run)' if dry_run else ''}"
    subject = _subject(f"SDC: incident on {incident.target} closed: {label}")
    replacement = incident.replacement
    where = (
        f"instances {', '.join(incident.instance_ids) or 'none'}"
        if incident.is_job
        else f"instance {incident.instance_id}"
    )
    lines = [
        f"Incident {incident.incident_id} closed as {label}.",
        f"Cluster {incident.cluster_name}, {where}.",
        f"Metrics: {', '.join(incident.metrics) or 'none'}",
        f"Deep health check: {card_lines.health_summary(incident)}",
        *card_lines.reboot_lines(incident),
        *card_lines.node_lines(incident),
        *card_lines.release_lines(incident),
        *_kept_lines(incident),
    ]
    if incident.is_job:
        lines.append(
            "Ambiguous alarm (no rank named for certain): the involved nodes were health-checked; "
            "no replacement is proposed. A node that failed its check is named above."
        )
    lines += card_lines.resume_lines(incident)
    if incident.hold:
        lines.append(f"Held: {incident.hold.reason}")
    if incident.decision:
        lines.append(
            f"Decision: {incident.decision.decision} "
            f"({incident.decision.comment or 'no comment'}) "
            f"by {incident.decision.who}"
        )
    if replacement:
        lines.append(
            f"Replacement: {replacement.status}; "
            f"new instance: {replacement.new_instance_id or 'unknown'}"
        )
    if dry_run:
        verb = "rebooted" if incident.reboot and not replacement else "replaced"
        lines.append(f"DRY RUN: would have {verb} {incident.instance_id}; nothing was {verb}.")
    if incident.reason:
        lines.append(f"Reason: {incident.reason}")
    if incident.error:
        lines.append(f"Error: {json.dumps(incident.error.to_record(), sort_keys=True)[:2000]}")
    lines.append("The audit log holds every step of this incident.")
    return Card(subject, (Section(None, lines),))


def _kept_lines(incident: Incident) -> list[str]:
    if not incident.recovery_unknown:
        return []
    return [
        "Node kept: a reboot or replacement may still be running, so the node stays cordoned and "
        "its lock and guard slot are kept. Reconciliation releases it once HyperPod reports it "
        "Running again (or gone), and raises an alarm if it cannot."
    ]


def _subject(text: str) -> str:
    ascii_only = text.encode("ascii", "replace").decode("ascii")
    return ascii_only[:SUBJECT_LIMIT]
