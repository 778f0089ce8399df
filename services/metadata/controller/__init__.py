"""The controller: election, placement, partition changes, topics and node registration."""
