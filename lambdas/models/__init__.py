"""Typed events, payloads, records and errors shared by the logic, adapters and handlers."""
