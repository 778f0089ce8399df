"""The metadata service."""
