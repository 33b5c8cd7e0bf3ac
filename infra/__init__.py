"""Everything outside the functions, one folder for each place it runs: `stack/` at deploy time
(the CDK app), `cli/` in an operator's shell (`sdc`), `local/` on this machine (the local run on
moto and the drill)."""
