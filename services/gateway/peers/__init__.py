"""Typed clients of the services the gateway calls: storage nodes and the metadata service."""
