"""Helpers of the consumer-group integration tests: topics with unique names whose partitions
all have a leader, and SDK consumers in their own process (`member_process.py`) that a test can
SIGKILL."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from riverlog.client import AdminClient, NewTopic
from riverlog.cluster import unique_topic_name

HERE = Path(__file__).resolve().parent


def create_topic(bootstrap: str, prefix: str, partitions: int, name: str | None = None) -> str:
    name = name or unique_topic_name(prefix)
    with AdminClient(bootstrap_servers=bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])
        for _ in range(200):
            described = admin.describe_topics([name])[name]
            if all(p.leader >= 0 for p in described.partitions):
                break
    return name


def start_member(bootstrap: str, topic: str, group: str, *extra: str) -> subprocess.Popen[str]:
    """An SDK consumer in its own process; it prints `ASSIGNED gen p,p,...` and
    `COMMITTED p:offset,...` lines on stdout (see member_process.py)."""
    return subprocess.Popen(
        [sys.executable, str(HERE / "member_process.py"), bootstrap, topic, group, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
