"""``python -m hseg.cli``: the same as the ``hseg`` console script."""

import sys

from hseg.cli import main

sys.exit(main())
