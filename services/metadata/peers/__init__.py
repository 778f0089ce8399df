"""Typed clients of other processes the metadata service calls (the controller, for forwarding)."""
