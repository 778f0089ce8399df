"""Draining marks (decision 0025's addendum): their etcd record, and when the controller ends
one by itself (the node unregistered and no partition names it)."""

from __future__ import annotations

import pytest

from riverlog.services.metadata.controller.draining import ended_marks
from riverlog.services.metadata.records import draining_nodes_decode, draining_nodes_encode

pytestmark = pytest.mark.timeout(10)


def test_record_round_trip():
    assert draining_nodes_decode(draining_nodes_encode({4, 2})) == frozenset({2, 4})
    assert draining_nodes_encode([4, 2]) == draining_nodes_encode({2, 4})  # stable
    with pytest.raises(ValueError):
        draining_nodes_decode(b'{"nodes": 4}')


def test_a_mark_ends_once_the_node_left_and_holds_nothing():
    # 4: drained and stopped; 5: drained, still registered (outside the launcher, before the
    # operator stops it); 6: crashed mid-drain, a partition still names it
    assert ended_marks({4, 5, 6}, registered={1, 2, 3, 5}, named={1, 2, 3, 6}) == {4}
    assert ended_marks(set(), registered={1}, named={1}) == frozenset()
