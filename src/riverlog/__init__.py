"""Riverlog: a distributed, partitioned, replicated commit log in the design of Apache Kafka."""

__version__ = "0.1.0"
