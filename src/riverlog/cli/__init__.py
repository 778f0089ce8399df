"""The `riverlog` command line, modelled on Kafka's tools."""
