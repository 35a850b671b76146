"""Model backends, plugged in by name ('scripted', 'openai', 'anthropic') or by dotted path to a class."""

from functools import lru_cache

from django.utils.module_loading import import_string

from agents.backends.base import Backend

BUILTIN = {
    "scripted": "agents.backends.scripted.ScriptedBackend",
    "openai": "agents.backends.openai.OpenAIBackend",
    "anthropic": "agents.backends.anthropic.AnthropicBackend",
}
# Backends that talk HTTP and so need a base_url.
HTTP_BACKENDS = frozenset({"openai", "anthropic"})


@lru_cache(maxsize=32)
def backend_class(name: str) -> type:
    return import_string(BUILTIN.get(name, name))


def get_backend(profile: dict) -> Backend:
    return backend_class(profile["backend"])(profile)
