"""`python -m sdc_remediation.infra.local.drill` (`make drill ARGS=...`): run one scenario or all, print each
outcome (or one JSON document per scenario), exit 0 only when every one passed."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from sdc_remediation.infra.local import drill
from sdc_remediation.infra.local.drill.announce import Announcer
from sdc_remediation.infra.local.drill.render import Style, render
from sdc_remediation.infra.local.drill.runner import run_scenario
from sdc_remediation.infra.local.drill.scenarios import DEFAULT, SCENARIOS, Scenario
from sdc_remediation.infra.stack.toolchain import node_problem
from sdc_remediation.lambdas.models.incident import IncidentState
from sdc_remediation.lambdas.models.payloads import Decision

OUTPUTS_FILE = ".drill/outputs.json"
REQUEST_LOG = ".drill/serve.log"
"""Where `--serve` writes the served account's HTTP request log (appended)."""


def _chat_rendering(run: Any) -> str:
    """What a chat channel (an `https` subscriber: Amazon Q Developer in chat applications)
    got of the approval card, exactly as published."""
    renderings = run.renderings("approve")
    chat = renderings.get("https")
    if chat is None:
        return "\n(no chat rendering: the notice went out as plain text only)"
    return (
        "\nWhat a chat channel gets (https subscribers: Amazon Q Developer in chat "
        "applications), the same notice as a custom notification:\n\n"
        + json.dumps(json.loads(chat), indent=2, ensure_ascii=False)
    )


def _serve_until_decided(run: Any, incident_id: str, port: int) -> None:
    """Serve the local account over HTTP and wait until someone decides with the CLI."""
    print(_chat_rendering(run))
    endpoint = run.serve(port, REQUEST_LOG)
    path = run.write_outputs(OUTPUTS_FILE)
    key = os.environ.get("AWS_ACCESS_KEY_ID", "")
    secret = os.environ.get("AWS_SECRET_ACCESS_KEY", "")
    print(
        "\nThe local account is served at " + endpoint + f" (its request log: {REQUEST_LOG}); "
        "it stays served after the decision, until Ctrl-C. Decide from another shell, as the "
        "local account's operator (its IAM user signs the identity proof `sdc approve` "
        "attaches):\n\n"
        f"  export AWS_ACCESS_KEY_ID={key} AWS_SECRET_ACCESS_KEY={secret} AWS_DEFAULT_REGION=us-west-2\n"
        f"  .venv/bin/sdc --endpoint-url {endpoint} --outputs {path} show {incident_id}\n"
        f"  .venv/bin/sdc --endpoint-url {endpoint} --outputs {path} page\n"
        f"  .venv/bin/sdc --endpoint-url {endpoint} --outputs {path} approve {incident_id} -m 'looks bad'\n"
        f"  .venv/bin/sdc --endpoint-url {endpoint} --outputs {path} reject {incident_id} -m 'not the GPU'\n"
        "\nWaiting for the decision (Ctrl-C to stop)...",
        flush=True,
    )
    while True:
        incident = run.incident(incident_id)
        if incident is not None and incident.state != IncidentState.AWAITING_APPROVAL:
            return None
        time.sleep(0.2)


def _stop_on_sigterm() -> None:
    """SIGTERM stops the drill as Ctrl-C does: the served account shuts down cleanly."""

    def stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


def _serve_until_stopped(render_outcome: Callable[[Any], None]) -> Callable[[Any, Any], None]:
    """After the scenario: its outcome, then the account stays served until Ctrl-C or SIGTERM,
    so that `sdc show` (what the decision's answer suggests) still reads it."""

    def linger(run: Any, outcome: Any) -> None:
        render_outcome(outcome)
        endpoint = run.serve(0)  # already served: its address
        ids = " ".join(i["incident_id"] for i in outcome.incidents) or "<incident id>"
        print(
            f"\nThe scenario has ended; the local account stays served at {endpoint} until "
            f"Ctrl-C (request log: {REQUEST_LOG}). Look at it from another shell:\n\n"
            f"  .venv/bin/sdc --endpoint-url {endpoint} --outputs {OUTPUTS_FILE} show {ids}\n"
            f"  .venv/bin/sdc --endpoint-url {endpoint} --outputs {OUTPUTS_FILE} status\n"
            f"  .venv/bin/sdc --endpoint-url {endpoint} --outputs {OUTPUTS_FILE} page"
            "   (the dashboard's page: .drill/page.html, and .png with Chromium)\n",
            flush=True,
        )
        try:
            while True:
                time.sleep(0.5)
        except KeyboardInterrupt:
            print("\nStopping: the served account shuts down.", flush=True)

    return linger


def _prepare(scenarios: Sequence[Scenario], announcer: Announcer) -> None:
    """The slow parts of a first run, said out loud with their elapsed time: the Lambda asset
    (pip fetches its wheels once) and a template per distinct context (kept in build/synth,
    so later runs take a hash check each)."""
    with announcer.step("loading the CDK and moto"):
        from sdc_remediation.infra.local.run import synthesized_template
        from sdc_remediation.infra.stack.asset import build_lambda_asset
    with announcer.step("building the Lambda asset", "the first time, pip fetches its wheels"):
        build_lambda_asset()
    contexts: dict[str, Any] = {}
    for scenario in scenarios:
        contexts.setdefault(json.dumps(scenario.context or {}, sort_keys=True), scenario)
    for scenario in contexts.values():
        settings = f" with {json.dumps(scenario.context)}" if scenario.context else ""
        with announcer.step(f"synthesizing the stack{settings}", "the first time, 10 to 30 s"):
            synthesized_template(scenario.context)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="make drill", description=(drill.__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--scenario", default=DEFAULT, choices=[*sorted(SCENARIOS), "all"])
    parser.add_argument(
        "--ddp",
        dest="scenario",
        action="store_const",
        const="ddp-replay",
        help="--scenario ddp-replay",
    )
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument("--json", action="store_true", help="one JSON document per scenario")
    parser.add_argument(
        "--interactive", action="store_true", help="pause at the approval and ask for the decision"
    )
    parser.add_argument(
        "--serve",
        type=int,
        nargs="?",
        const=5005,
        metavar="PORT",
        help="at the approval, serve the local account on 127.0.0.1:PORT (default 5005) and "
        "wait for a decision from the sdc CLI (it prints the command)",
    )
    parser.add_argument("--verbose", action="store_true", help="show the functions' own logs")
    args = parser.parse_args(argv)
    if args.list:
        for scenario in SCENARIOS.values():
            print(f"{scenario.name:<20} {scenario.summary}")
        return 0
    if not args.verbose:
        # The functions log JSON lines to stdout, as on Lambda; here they would bury the
        # timeline. Set before the handlers are imported. (Their EMF metrics never reach stdout
        # in the local run: infra/local/metrics.py puts them into the local account.)
        os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    problem = node_problem()
    if problem is not None:
        print(f"make drill: {problem}", file=sys.stderr)
        return 2
    tty = sys.stdout.isatty() and not args.json
    style = Style(tty and os.environ.get("NO_COLOR") is None)

    def progress(text: str) -> None:
        if tty:
            sys.stderr.write(f"\r\033[K… {text[:100]}")
            sys.stderr.flush()

    def ask(run: Any, incident_id: str, card: str) -> str | None:
        if tty:
            sys.stderr.write("\r\033[K")
        if args.serve is not None:
            print("What e-mail gets (the approval card, plain text):\n")
        print(card)
        if args.serve is not None:
            _serve_until_decided(run, incident_id, args.serve)
            return None
        while True:
            answer = (
                input(f"\nDecision for {incident_id} [approve/reboot/reject]: ").strip().lower()
            )
            if answer in (Decision.APPROVE, Decision.REBOOT, Decision.REJECT):
                return answer

    lingered: list[Any] = []
    linger = None
    if args.serve is not None:
        _stop_on_sigterm()

        def shown(outcome: Any) -> None:
            lingered.append(outcome)
            render(outcome, sys.stdout, style)

        linger = _serve_until_stopped(shown)
    names = sorted(SCENARIOS) if args.scenario == "all" else [args.scenario]
    announcer = Announcer(sys.stderr, live=tty and sys.stderr.isatty())
    try:
        _prepare([SCENARIOS[name] for name in names], announcer)
    except Exception as exc:  # one line, as a failed scenario says it
        print(style(f"FAIL  set-up: {type(exc).__name__}: {exc}", "31;1"))
        return 1
    failed = 0
    for name in names:
        if not tty:
            print(
                f"drill: running {name} (the stack stood up in a local account, then the scenario)",
                file=sys.stderr,
                flush=True,
            )
        try:
            outcome = run_scenario(
                SCENARIOS[name],
                progress=progress,
                ask=ask if args.interactive or args.serve is not None else None,
                linger=linger,
            )
        except KeyboardInterrupt:
            print(f"\nstopped: {name} did not finish", file=sys.stderr, flush=True)
            return 130
        except Exception as exc:  # a drill that breaks says how, in one line, and fails
            if tty:
                sys.stderr.write("\r\033[K")
            print(style(f"FAIL  {name}: {type(exc).__name__}: {exc}", "31;1"))
            failed += 1
            continue
        if tty:
            sys.stderr.write("\r\033[K")
        if args.json:
            print(json.dumps(outcome.to_json()))
        elif not lingered or lingered[-1].problems != outcome.problems:
            render(outcome, sys.stdout, style)  # in serve mode, only what the teardown added
        failed += not outcome.passed
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
