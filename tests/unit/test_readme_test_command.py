"""The README's test command is CI's: every lane (running the README's other commands is
``tests/e2e/test_readme.py``)."""

from __future__ import annotations

import re

from tests.support import REPO

README = (REPO / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"```bash\n(.*?)```", README, re.S)


def runnable(block: str) -> str:
    """A block's command without its ``pip install`` steps (``a && pip install x && b`` -> ``b``)."""
    steps = [s.strip() for s in block.strip().split("&&")]
    return " && ".join(s for s in steps if not s.startswith("pip install"))


def test_test_command_is_the_ci_command():
    tests = next(b for b in BLOCKS if "pytest" in b)
    assert runnable(tests) == "HF_HUB_OFFLINE=1 python -m pytest -q tests"  # every lane, not pytest's testpaths
    assert "python -m pytest -q tests\n" in (REPO / ".ci" / "run").read_text()
