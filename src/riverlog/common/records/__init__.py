"""Kafka's RecordBatch v2: the one byte format written by producers, stored and replicated by
storage nodes, and read by consumers."""
