"""`python -m riverlog.services.metadata`: start one metadata instance."""

from .app import main

if __name__ == "__main__":
    main()
