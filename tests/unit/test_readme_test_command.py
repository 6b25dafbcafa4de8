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


def test_setup_takes_the_cpu_torch_and_says_how_long_the_tests_take():
    # issue 57 items 2 and 3: from PyPI, a bare torch pin pulled the CUDA build; the README did not say
    # that the test command runs for most of an hour, nor what a skip means
    setup = next(b for b in BLOCKS if "hseg index examples/data/example.md" in b)
    assert setup.split("&&")[0].strip() == "pip install torch==2.13.0"  # first, as CI's
    assert "pip install --quiet torch==2.13.0" in (REPO / ".ci" / "run").read_text()
    set_up = " ".join(README[README.index("## Set-up"):README.index("**2. Run the tests**")].split())
    assert "CUDA build" in set_up and "--index-url https://download.pytorch.org/whl/cpu" in set_up
    tests_part = README[README.index("**2. Run the tests**"):README.index("The two notebooks")]
    assert "minutes" in tests_part and "A skip says what it needs" in tests_part and "../shared" in tests_part
