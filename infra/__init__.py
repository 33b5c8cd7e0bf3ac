"""Everything outside the functions, one folder for each place it runs: `stack/` at deploy time
(the CDK app), `cli/` in an operator's shell (`sdc`), `local/` on this machine (the local run on
moto and the drill). `construct.py` is the deploy side as a library: the `SdcRemediation`
construct for a team's own CDK app (defined in `stack/`)."""
