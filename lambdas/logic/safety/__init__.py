"""What keeps the pipeline from acting wrongly or widely: the pause switch, storm hold and
blast-radius guard (`guard`), and which approval decisions are accepted, from whom
(`decisions`). The engine that sends an approved reboot or replacement (once, written ahead) is
the recovery stage's own: `sdc_remediation.lambdas.logic.recovery.engine`."""
