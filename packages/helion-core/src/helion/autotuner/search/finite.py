"""Finite search: benchmark exactly the configs given (``@helion.kernel(configs=[...])``)."""

from __future__ import annotations

from typing import Any
from typing import Iterable
from typing import Mapping

from helion.autotuner.search.base import BaseSearch
from helion.autotuner.search.base import config_key


class FiniteSearch(BaseSearch):
    """Measure exactly ``configs`` and return the fastest. Also made as public Helion makes it,
    ``FiniteSearch(bound_kernel, args, configs=[...])`` (default: the kernel's ``configs=``),
    whose ``autotune()`` picks among them (the choice is not cached)."""

    name = "finite"
    takes_configs = True

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
                len(given),
                hint="with a single config there is nothing to choose between: run the kernel "
                "with it directly, as @helion.kernel(config=...) or bound_kernel.set_config(...)"
                if len(given) == 1
                else "pass two or more helion.Config objects (or dicts of their entries)",
            )
        self.configs = []
        seen: set[str] = set()
        for position, raw in enumerate(given):
            config = self.prepare(raw)
            if config is None:
                raise exc.InvalidConfig(
                    f"configs[{position}] is not a valid config for this kernel: "
                    f"{self._rejection(raw)}"
                )
            key = config_key(config)
            if key not in seen:
                seen.add(key)
                self.configs.append(config)
        self.max_evaluations = max(self.max_evaluations, len(self.configs))

    def _check_bound_options(self) -> None:
        configs = self.options.get("configs")
        if configs is None:
            kernel = getattr(self.bound, "kernel", None)
            configs = list(getattr(kernel, "configs", None) or ())
        elif isinstance(configs, (Mapping, str, bytes)) or not isinstance(configs, Iterable):
            from helion import exc

            raise exc.InvalidConfig(
                f"FiniteSearch(bound_kernel, args, configs=...) takes a list of configs, got "
                f"{type(configs).__name__}; write configs=[config, ...]"
            )
        configs = list(configs)
        self.options["configs"] = configs
        # the entries are checked now, where they are given (position and reason named)
        FiniteSearch(self.bound.config_spec, None, configs=configs)

    def _rejection(self, raw: object) -> str:
        """Why ``raw`` (an entry of ``configs``) is not a config of this kernel's space."""
        if not isinstance(raw, Mapping):
            return (
                f"got {type(raw).__name__} {raw!r:.80}; expected a helion.Config or a dict of "
                "its entries"
            )
        try:
            candidate = self.with_overrides(raw)
        except Exception as error:
            reason = " ".join(str(error).split()) or type(error).__name__
            return f"{dict(raw)!r}: {reason}"
        if self.config_filter is not None and self.config_filter(candidate) is None:
            return f"{dict(raw)!r} is dropped by the config filter (autotune_config_filter or the backend's config_problem)"
        return f"{dict(raw)!r}"

    def _search(self) -> None:
        self.evaluate(self.configs)
