"""`make drill`: watch an SDC incident go from a training rank to an audited outcome, locally.

    python -m sdc_remediation.infra.local.drill                      # the default scenario: replay culprit
    python -m sdc_remediation.infra.local.drill --list
    python -m sdc_remediation.infra.local.drill --scenario reject --json

Each scenario (`scenarios`) runs end to end on the local run (`runner`, with what `stage` sets
up around the stack), is judged on what happened (`judge`) and printed (`render`). Exit status 0
only when the scenario's expected outcome happened (`__main__`).
"""
