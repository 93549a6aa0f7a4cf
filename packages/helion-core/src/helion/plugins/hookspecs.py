"""The plugin contract: every hook a Helion plugin may implement.

A plugin is a module (or any object) whose functions are marked with
``helion.plugins.hookimpl`` and named after one of the specs below. Plugins are found through
the entry-point group ``helion.plugins``; each entry point names such a module::

    [project.entry-points."helion.plugins"]
    triton = "helion_triton.plugin"

Hooks are always called with keyword arguments. An implementation may accept a subset of a
spec's arguments, so a spec can gain arguments later without breaking existing plugins.
Implementations should be cheap and import heavy dependencies lazily: they run during the first
backend or op lookup of a process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from typing import Any
from typing import Callable

import pluggy

if TYPE_CHECKING:
    from helion.backends.base import Backend
    from helion.language._ops import Op

PROJECT_NAME = "helion"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


@hookspec
def helion_backends() -> list[Backend]:
    """Return the code-generation backends this plugin provides.

    Called once per plugin manager, at the first backend lookup. Each backend name must be unique
    across all installed plugins; two plugins providing the same name is reported as an error
    when that name is looked up.

    Returns:
        Instances of subclasses of ``helion.backends.base.Backend``. A backend whose
        requirements are missing (no GPU, toolkit not installed) must still be returned, and
        report why through ``Backend.is_available()``, so that ``helion backends`` can show it.
    """


@hookspec
def helion_language_ops() -> list[Op]:
    """Return language ops this plugin adds to ``helion.language``.

    This is how packages other than core add DSL functions (for example ``hl.signal`` and
    ``hl.all_reduce`` from helion-distributed). Each op is exposed under its ``name``; a name
    that clashes with a core op or another plugin's op is an error.

    Returns:
        ``helion.language._ops.Op`` objects, each with its public function and type rule.
    """


@hookspec
def helion_lowerings(backend: str) -> dict[Op, Callable[..., Any]]:
    """Return lowering rules of this plugin's ops for one backend.

    Lets the package that owns an op teach every backend how to generate code for it, instead
    of every backend knowing every package. The mapping is merged into the backend's lowering
    table; an op that already has a rule there is an error.

    Args:
        backend: Name of the backend whose lowering table is being built (e.g. ``"triton"``).

    Returns:
        A mapping from op to the backend-specific lowering rule; an empty dict when this plugin
        has nothing for that backend.
    """


@hookspec
def helion_autotune_refusal(bound: Any, args: tuple[Any, ...]) -> BaseException | None:
    """Refuse to autotune ``bound`` the ordinary way: in this process alone, on clones of
    ``args``.

    The autotune driver (and ``autotune_multi``) asks before it runs a search or benchmarks a
    ``configs=`` list; a cache hit, effort ``none`` and ``settings.autotuner_fn`` are not asked
    about. helion-distributed refuses kernels whose launches are collective: every rank has to
    try the same configs together (``helion_distributed.autotune``).

    Args:
        bound: The ``BoundKernel`` about to be tuned.
        args: Its arguments.

    Returns:
        An exception for the driver to raise instead of tuning, or None to let it tune.
    """


@hookspec
def helion_search_algorithms() -> dict[str, type]:
    """Return extra autotuner search algorithms.

    Returns:
        A mapping from the algorithm's name (as selected by the user, e.g. ``"my_search"``) to
        its class, which follows the interface of ``helion.autotuner``'s built-in searches.
    """
