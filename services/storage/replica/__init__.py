"""Partition replicas on this node: leadership, high watermark, and the produce, fetch and offsets logic over them."""
