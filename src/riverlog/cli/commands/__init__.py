"""One module per `riverlog` subcommand, each with `register(subparsers)`."""
