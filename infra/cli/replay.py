"""`sdc replay-spool`: re-send the reports a training rank could not deliver and spooled
(`trainer_emitter.spool`), from an operator's machine."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

from sdc_remediation.infra.cli.exits import EXIT_FAILED, EXIT_OK, CliError
from sdc_remediation.infra.cli.render import print_json, wants_json
from sdc_remediation.infra.cli.wiring import Operator
from trainer_emitter import spool
from trainer_emitter.sinks import AwsSink


def cmd_replay_spool(op: Operator, args: argparse.Namespace) -> int:
    region = op.session.region_name
    if not region:
        raise CliError("no AWS region: pass --region, set AWS_REGION, or give the profile one")
    logging.basicConfig(level=logging.WARNING, format="sdc: %(levelname)s %(message)s")
    paths = args.paths or [Path(os.environ.get("SDC_SPOOL_DIR") or spool.default_spool_dir())]
    sink = AwsSink(
        region=region,
        endpoint_url=args.endpoint_url,
        event_bus=args.event_bus,
        connect_timeout=5,
        read_timeout=10,
        max_attempts=5,
        session_factory=lambda: op.session,
    )
    try:
        result = spool.replay(paths, sink)
    except spool.SpoolError as err:
        raise CliError(str(err)) from err
    if wants_json(args):
        print_json(
            {
                "delivered": result.delivered,
                "still_pending": result.still_pending,
                "rejected_lines": result.rejected_lines,
                "invalid": result.invalid,
                "files": [str(p) for p in result.files],
            }
        )
    elif not result.files:
        print(f"no spool files in {', '.join(str(p) for p in paths)}")
    else:
        print(f"{len(result.files)} spool files; delivered {len(result.delivered)} reports")
        for report_id in result.delivered:
            print(f"  delivered      {report_id}")
        for report_id in result.still_pending:
            print(f"  still pending  {report_id} (kept in its spool file for the next replay)")
        if result.rejected_lines:
            print(f"  {result.rejected_lines} unreadable lines set aside in <file>.rejected")
        if result.invalid:
            print(f"  {len(result.invalid)} invalid reports set aside in <file>.invalid, not sent")
    return EXIT_OK if result.ok else EXIT_FAILED
