"""What every stage stands on: the step (load, save with retries, audit, fail visibly, deliver a
notice), identifiers, the incident states and their transitions, the lifecycle event of each
state change, the hash-chained audit log and its scheduled check, and the duration metrics."""
