"""Partition replicas on this node: leadership, the high watermark, and the produce, fetch
and offsets logic over them."""
