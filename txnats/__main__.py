"""``python -m txnats``: the ``txnats`` command line (see :mod:`txnats.cli`)."""

from txnats.cli import main

if __name__ == "__main__":
    main()
