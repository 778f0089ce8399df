"""The storage service."""
