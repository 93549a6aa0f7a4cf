"""Helion's plugin system (pluggy, project name ``"helion"``).

A plugin package declares an entry point in the group ``helion.plugins`` that names a module of
hook implementations; the hooks are specified in :mod:`helion.plugins.hookspecs`::

    from helion.plugins import hookimpl

    @hookimpl
    def helion_backends():
        return [MyBackend()]

Plugins are discovered lazily, once per process, at the first backend or op lookup.
"""

from __future__ import annotations

from helion.plugins.hookspecs import hookimpl as hookimpl
from helion.plugins.hookspecs import hookspec as hookspec
from helion.plugins.manager import DISABLE_AUTOLOAD_ENV as DISABLE_AUTOLOAD_ENV
from helion.plugins.manager import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from helion.plugins.manager import HookResult as HookResult
from helion.plugins.manager import PluginFailure as PluginFailure
from helion.plugins.manager import PluginInfo as PluginInfo
from helion.plugins.manager import autoload_disabled as autoload_disabled
from helion.plugins.manager import call_each_plugin as call_each_plugin
from helion.plugins.manager import generation as generation
from helion.plugins.manager import get_plugin_manager as get_plugin_manager
from helion.plugins.manager import is_loaded as is_loaded
from helion.plugins.manager import list_plugins as list_plugins
from helion.plugins.manager import load_failures as load_failures
from helion.plugins.manager import plugin_info as plugin_info
from helion.plugins.manager import register_plugin as register_plugin
from helion.plugins.manager import reset_plugin_manager as reset_plugin_manager
from helion.plugins.manager import unregister_plugin as unregister_plugin

__all__ = [
    "DISABLE_AUTOLOAD_ENV",
    "ENTRY_POINT_GROUP",
    "HookResult",
    "PluginFailure",
    "PluginInfo",
    "autoload_disabled",
    "call_each_plugin",
    "generation",
    "get_plugin_manager",
    "hookimpl",
    "hookspec",
    "is_loaded",
    "list_plugins",
    "load_failures",
    "plugin_info",
    "register_plugin",
    "reset_plugin_manager",
    "unregister_plugin",
]
