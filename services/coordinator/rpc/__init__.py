"""gRPC adapters of the coordinator: the servicer and the proto converters."""
