"""The fleet what-if (`make fleet`, `python -m sdc_remediation.infra.local.fleet`): a failure history replayed
through the pipeline's own logic on a virtual clock, against a fake HyperPod cluster of 2,048
instances, beside HyperPod's own recovery alone. `causes` holds the history and what signals
each cause; `whatif` the job, the approvers and the replay; `__main__` the command."""
