"""Committed offsets and the `__consumer_offsets` record encoding."""
