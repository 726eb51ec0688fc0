"""`loopwright.__version__`: the installed distribution's version, read from its metadata on
first use (importing `importlib.metadata` costs more than the rest of `import loopwright`)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("loopwright")
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"
