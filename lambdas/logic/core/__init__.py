"""What every stage stands on: the step (load, save with retries, audit, fail visibly, publish
each state change, deliver a notice), identifiers, the incident states and their transitions,
the lifecycle event of a state change, the hash-chained audit log and its scheduled check, the
node's history of earlier incidents, and the duration metrics."""
