"""The zero-copy fetch channel: a raw TCP server that sends stored batches with os.sendfile."""
