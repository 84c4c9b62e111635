"""``python -m bench``: see :mod:`bench.run` and docs/benchmarks.md."""

from __future__ import annotations

import sys

from bench.run import main

sys.exit(main())
