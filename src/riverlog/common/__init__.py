"""The shared library: what more than one service needs (codec, errors, config, gRPC, tracing)."""
