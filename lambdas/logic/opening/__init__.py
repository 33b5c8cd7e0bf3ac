"""How a claim becomes an incident: a report's claims checked against what the reporter cannot
forge, what arrives for a node an incident already speaks for joined to it, a node-level or
job-level incident opened, a held one recorded closed at birth, a held job-level one let
proceed, and the remediation execution started once."""
