"""What every converter shares: importing its library lazily, with the install command when it is missing.

Example:
    >>> need("json", "JSON").__name__
    'json'
"""

from __future__ import annotations

import importlib
from types import ModuleType

from hseg.errors import FormatSupportMissing

#: the command that installs every converter's library
INSTALL_HINT = 'pip install "hseg[formats]"'


def need(module: str, what: str) -> ModuleType:
    """``module`` imported, or :class:`~hseg.errors.FormatSupportMissing` naming ``what`` it reads and the fix."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise FormatSupportMissing(f"reading {what} files needs the {module!r} package, which is not installed: "
                                   f"{INSTALL_HINT}", module=module) from exc
