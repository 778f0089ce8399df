"""`python -m riverlog.services.quota`: run one quota service instance."""

from .app import main

main()
