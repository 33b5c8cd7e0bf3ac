"""The drill's report on the terminal: the timeline, the notification the approver got, the
audit log with its hash chain, the incident lifecycle events, the dashboard's metrics, the end
of each incident, PASS or FAIL."""

from __future__ import annotations

from typing import TextIO

from sdc_remediation.infra.local.drill.runner import Outcome


class Style:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.enabled else text


def render(outcome: Outcome, out: TextIO, style: Style) -> None:
    bold, dim = "1", "2"
    out.write(style(f"SDC drill: {outcome.scenario}", bold) + "\n\n")
    out.write(style("Timeline", bold) + "\n")
    for line in outcome.timeline:
        out.write(f"  {style(f'+{line.at:6.2f}s', dim)}  {line.who:<19} {line.what}\n")
    if outcome.notification:
        out.write("\n" + style("The notification the approver got", bold) + "\n")
        for text in outcome.notification.splitlines():
            out.write(f"  │ {text}\n")
    out.write("\n" + style("Audit log", bold) + "\n")
    for incident_id, entries in outcome.audit.items():
        out.write(f"  {incident_id}\n")
        for entry in entries:
            out.write(
                f"    {entry['seq']:>3}  {entry['at'][11:23]}  {entry['actor'][:28]:<28} "
                f"{entry['action']:<24} {style(entry['hash'], dim)} ← {style(entry['prev_hash'] or '-', dim)}\n"
            )
    verdict = "verified" if outcome.chain_ok else "BROKEN"
    out.write(f"  hash chain: {verdict}\n\n")
    if outcome.lifecycle:
        out.write(
            style(
                "Lifecycle events (EventBridge: sdc.remediation, SDC Incident State Change)", bold
            )
            + "\n"
        )
        for event in outcome.lifecycle:
            out.write(
                f"  {event['incident_id']}  #{event['sequence']:<3} "
                f"{event['old_state'] or '(new)'} → {event['new_state']}"
                + ("  (terminal)" if event["terminal"] else "")
                + "\n"
            )
        out.write("\n")
    if outcome.dashboard:
        out.write(style("Dashboard", bold) + "\n")
        out.write(
            f"  {len(outcome.dashboard)} metrics of this run on it, each as published: "
            + ", ".join(m.rsplit("/", 1)[-1] for m in outcome.dashboard)
            + "\n\n"
        )
    for incident in outcome.incidents:
        new_id = incident["new_instance_id"]
        out.write(
            f"  {incident['instance_id'] or 'job-level incident'}: {incident['state']}"
            + (f" → new instance {new_id}" if new_id else "")
            + (
                " (dry run: recorded as would-replace, nothing was called)"
                if incident["dry_run"]
                else ""
            )
            + "\n"
        )
    if outcome.passed:
        out.write(style(f"PASS  {outcome.scenario} ({outcome.seconds:.1f} s)", "32;1") + "\n")
    else:
        out.write(style(f"FAIL  {outcome.scenario}", "31;1") + "\n")
        for problem in outcome.problems:
            out.write(f"  - {problem}\n")
