"""Model backends, chosen by name from a registry the platform engineer controls.

A profile's `backend` is a name: 'scripted', 'openai', 'anthropic', a name the deployment maps to
a class in WARRANT_MODEL_BACKENDS (name=module.Class), or the name of an entry point in the group
`warrant.backends` of a package it installed. A profile never gives a dotted path: a name that is
not registered is refused before anything is imported, since importing a module runs its code.
"""

import re
from importlib.metadata import entry_points

from django.conf import settings
from django.utils.module_loading import import_string

from agents.backends.base import Backend

BUILTIN = {
    "scripted": "agents.backends.scripted.ScriptedBackend",
    "openai": "agents.backends.openai.OpenAIBackend",
    "anthropic": "agents.backends.anthropic.AnthropicBackend",
}
# Backends that talk HTTP and so need a base_url.
HTTP_BACKENDS = frozenset({"openai", "anthropic"})
ENTRY_POINT_GROUP = "warrant.backends"
BACKEND_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}\Z")


class UnknownBackend(LookupError):
    """The name is not in the registry; nothing was imported."""


def _configured() -> dict:
    return {name.strip(): path.strip() for name, path in (settings.WARRANT.get("MODEL_BACKENDS") or {}).items()}


def registered_names() -> list[str]:
    names = set(BUILTIN) | {n for n in _configured() if BACKEND_NAME.match(n)}
    names |= {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP) if BACKEND_NAME.match(ep.name)}
    return sorted(names)


def backend_class(name: str) -> type:
    """The class registered under `name`; UnknownBackend, having imported nothing, for any other string."""
    if not isinstance(name, str) or not BACKEND_NAME.match(name):
        raise UnknownBackend(_unknown(name))
    if name in BUILTIN:  # the platform's own, never shadowed by configuration
        return _load(BUILTIN[name])
    configured = _configured()
    if name in configured:
        return _load(configured[name])
    for ep in entry_points(group=ENTRY_POINT_GROUP, name=name):
        return ep.load()
    raise UnknownBackend(_unknown(name))


_loaded: dict[str, type] = {}


def _load(path: str) -> type:
    if path not in _loaded:
        _loaded[path] = import_string(path)
    return _loaded[path]


def _unknown(name) -> str:
    return (f"{name!r} is not a registered model backend (registered: {', '.join(registered_names())}); a deployment "
            "adds one by name in WARRANT_MODEL_BACKENDS or as an entry point in the group warrant.backends")


def get_backend(profile: dict) -> Backend:
    return backend_class(profile["backend"])(profile)
