"""How an incident is put to people, worded from its record alone: the approval card and the
notices (plain text for e-mail, `cards`), the lines they are made of (`card_lines`) and their
chat rendering (`chat`).

Nothing here gathers, judges or writes: every function reads records (`sdc_remediation.lambdas.models`) and
returns text, so the card, the chat notice, `sdc show` and `sdc status` say what the record
says, and say it alike. Judging the evidence is `sdc_remediation.lambdas.logic.evidence`'s; the stored
recommendation is what this folder words. It imports no module of `sdc_remediation.lambdas.logic`, and the
logic's `core/` (the step every handler runs as) imports nothing of it.
"""
