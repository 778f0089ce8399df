"""Kafka's sticky assignors: "sticky" (eager) and "cooperative-sticky".

`base.py` holds what they share (member data, claim cleaning, the choice of algorithm),
`constrained.py` the algorithm for groups with one common subscription, `general.py` the one for
mixed subscriptions, `movements.py` their bookkeeping, `userdata.py` the user-data bytes.
"""

from .base import AbstractStickyAssignor, MemberData
from .cooperative import CooperativeStickyAssignor
from .sticky import StickyAssignor

__all__ = ["AbstractStickyAssignor", "CooperativeStickyAssignor", "MemberData", "StickyAssignor"]
