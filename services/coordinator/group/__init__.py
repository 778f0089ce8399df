"""Classic consumer groups: the state machine, members, one group, and the manager."""
