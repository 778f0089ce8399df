"""Tiered storage (KIP-405): the remote storage interface and its directory and S3
implementations, and the remote log segment metadata with its state machine. Domain code: no
gRPC."""
