"""``python -m helion``: the same command line as the ``helion`` console script."""

from __future__ import annotations

from helion.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
