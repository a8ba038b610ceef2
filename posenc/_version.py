"""The package's version, in one place (the root package and the result files read it)."""

__version__ = "0.2.0"
