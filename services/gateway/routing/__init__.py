"""Routing requests to partition leaders by the pushed metadata."""
