"""Attributes of a facade that are attributes of its parts (:class:`Delegated`), one line each, and old
names kept for a while with a :class:`DeprecationWarning` (``deprecated=``).

Example:
    >>> class Parts:
    ...     timeout = 5.0
    >>> class Facade:
    ...     timeout = Delegated("_parts.timeout", "Seconds to wait.", settable=True)
    ...     old_timeout = Delegated("_parts.timeout", "Seconds to wait.", deprecated="timeout")
    ...     def __init__(self):
    ...         self._parts = Parts()
    >>> facade = Facade()
    >>> facade.timeout = 2.0
    >>> facade._parts.timeout
    2.0
"""

from __future__ import annotations

import functools
import warnings
from typing import Any


class Delegated:
    """The attribute at the dotted ``path`` of the instance (``"_parts.binding.encoder"``), read, and
    set where ``settable``; ``doc`` is its docstring. With ``deprecated`` (what to use instead), each
    access warns with a :class:`DeprecationWarning` naming that."""

    def __init__(self, path: str, doc: str, *, settable: bool = False, deprecated: str | None = None) -> None:
        self._owner_path, _, self._last = path.rpartition(".")
        self._settable = settable
        self._deprecated = deprecated
        self.__doc__ = doc
        self._name = path

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = f"{owner.__name__}.{name}"

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        self._warn()
        return getattr(self._holder(instance), self._last)

    def __set__(self, instance: Any, value: Any) -> None:
        if not self._settable:
            raise AttributeError(f"{self._name} cannot be set")
        self._warn()
        setattr(self._holder(instance), self._last, value)

    def _holder(self, instance: Any) -> Any:
        return functools.reduce(getattr, self._owner_path.split("."), instance) if self._owner_path else instance

    def _warn(self) -> None:
        if self._deprecated is not None:
            # stacklevel 3: the caller's line, past this method and __get__/__set__
            warnings.warn(f"{self._name} is deprecated: {self._deprecated}", DeprecationWarning, stacklevel=3)
