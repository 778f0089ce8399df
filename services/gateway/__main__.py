"""`python -m riverlog.services.gateway`: run one gateway process."""

from .app import main

if __name__ == "__main__":
    main()
