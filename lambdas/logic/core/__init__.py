"""What every stage stands on: the step (load, save with retries, audit, fail visibly, publish
each state change as the record's lifecycle event, deliver a notice), identifiers, the incident
states and their transitions, the hash-chained audit log and its scheduled check, and the
duration metrics. It imports no evidence and no wording: what it publishes and delivers is
built from records."""
