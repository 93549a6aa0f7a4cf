"""Experimental Helion APIs: `backward`, an automatically generated backward kernel."""

from __future__ import annotations

from helion.experimental._autodiff import backward as backward
