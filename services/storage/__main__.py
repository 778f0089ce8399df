"""`python -m riverlog.services.storage`: run one storage node (see `app.py` for the options)."""

from .app import main

if __name__ == "__main__":
    main()
