"""Typed clients of other nodes: the leader a follower replicates from, and the controller."""
