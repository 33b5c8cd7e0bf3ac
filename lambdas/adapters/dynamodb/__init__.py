"""DynamoDB adapters: one per storage port, over the shared plumbing of `_table`.

The incidents table holds incidents with their locks (`incidents`), reports (`reports`), the
guard's slots, flags and storm holds (`guard`) and the repeat-offender history (`history`); the
audit table holds the audit log (`audit`). Layout: `keys`, and docs/pipeline.md, "Storage".
"""
