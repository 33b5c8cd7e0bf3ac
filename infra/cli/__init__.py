"""`sdc`: the operator's command line for the SDC remediation pipeline.

See the pipeline's state on one screen (`status`), list and inspect incidents, approve (replace),
reboot or reject one, reset a storm hold (through the approval state machine, exactly like the
console, so the audit log is the same), verify the audit log's hash chains, and re-send the
reports a training rank spooled. It finds the deployment through its stack's Outputs (`--stack`,
default SdcRemediation) or a JSON file of them (`--outputs`). Reference: docs/operate.md.

Thin on purpose: reading and writing go through the Lambda side's adapters and logic (the
incident store, the audit log and its chain check, the approval card), `replay-spool` through
`trainer_emitter.spool`. What only an operator does lives here, not in the Lambda asset: the
queries by state and over the whole audit log, and starting approval executions.

    main        the command line: options, commands, exit status (the `sdc` console script)
    wiring      the boto3 session, the deployment, the adapters a command works with
    deployment  the stack's Outputs, from CloudFormation or a JSON file
    status, incidents, decide, audit, replay
                the commands: status; incidents, holds and show; approve, reboot, reject and
                reset; audit verify; replay-spool
    queries, approvals
                the operator-only adapters: incidents by state, every audit chain; the
                approval state machine's executions
    render      what the commands print
    exits       exit statuses, and the one line an error prints
"""
