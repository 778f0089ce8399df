"""The quota service's gRPC adapter."""
