"""`python -m riverlog.services.coordinator`: run one coordinator instance."""

from .app import main

main()
