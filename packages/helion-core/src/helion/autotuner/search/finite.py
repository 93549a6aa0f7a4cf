"""Finite search: benchmark exactly the configs given (``@helion.kernel(configs=[...])``)."""

from __future__ import annotations

from typing import Any
from typing import Iterable
from typing import Mapping

from helion.autotuner.search.base import BaseSearch
from helion.autotuner.search.base import config_key


class FiniteSearch(BaseSearch):
    name = "finite"

    def __init__(
        self,
        config_spec: Any,
        evaluator: Any,
        *,
        configs: Iterable[Mapping[str, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        from helion import exc

        given = list(configs if configs is not None else kwargs.pop("seed_configs", ()))
        kwargs.pop("seed_configs", None)
        kwargs.setdefault("max_evaluations", max(len(given), 1))
        budget_seconds = kwargs.pop("budget_seconds", None)
        super().__init__(config_spec, evaluator, **kwargs)
        # the user asked for exactly these: only an explicit time budget cuts the list short
        self.budget_seconds = budget_seconds
        if len(given) < 2:
            raise exc.NotEnoughConfigs(
                len(given), hint="pass a single config as config=... instead"
            )
        self.configs = []
        seen: set[str] = set()
        for raw in given:
            config = self.prepare(raw)
            if config is None:
                raise exc.InvalidConfig(f"config {dict(raw)!r} is not valid for this kernel")
            key = config_key(config)
            if key not in seen:
                seen.add(key)
                self.configs.append(config)
        self.max_evaluations = max(self.max_evaluations, len(self.configs))

    def _search(self) -> None:
        self.evaluate(self.configs)
