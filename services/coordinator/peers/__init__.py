"""Clients of other services used by the coordinator (storage nodes)."""
