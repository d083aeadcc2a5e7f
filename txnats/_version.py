"""The version of txnats: the one place it is written (setup.cfg reads it)."""

__version__ = "0.1.0"
