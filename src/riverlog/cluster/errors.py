"""The launcher's exceptions, apart so every launcher module (and the CLI) can catch them
without importing the process or cluster machinery."""

from __future__ import annotations


class ClusterError(Exception):
    """A local cluster could not be started, found or controlled; the message says why."""


class ProcessStartError(ClusterError):
    """A process exited before it was ready, or was not ready in time (message has its log)."""


class ClusterNotFoundError(ClusterError):
    """No cluster state file in the data directory: nothing was started there."""
