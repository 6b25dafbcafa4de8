"""The lazy package face: a package's public names, each imported from its module when first read, so
that importing one module of a package loads no other (the chunker's segmenters and encoders, torch)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, home: Mapping[str, str]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` for ``package`` that reads each name of ``home`` (name -> the module
    holding it) from its module on first use.

    Example:
        >>> read = lazy_names("hseg.retrieval", {"UNITS": "hseg.retrieval.settings"})
        >>> "auto" in read("UNITS")
        True
    """
    def __getattr__(name: str) -> Any:
        if name in home:
            return getattr(importlib.import_module(home[name]), name)
        raise AttributeError(f"module '{package}' has no attribute {name!r}")

    return __getattr__
