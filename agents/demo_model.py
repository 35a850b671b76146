"""The demo agent's model: `scripted`, or a model server that the environment names, in one step.

    WARRANT_MODEL_URL=http://127.0.0.1:11434/v1 WARRANT_MODEL_NAME=llama3.1 make run

With WARRANT_MODEL_URL and WARRANT_MODEL_NAME set, load_demo makes (or updates) the profile
`local-model` on that server (backend WARRANT_MODEL_BACKEND, default `openai`; key from the
variable WARRANT_MODEL_API_KEY_ENV names, if any) with `scripted` as its fallback, and points the
demo agent at it: a server that is down still gets an answer, and the run says it fell back.
Without them, the demo agent is put back on `scripted`. Either way only a demo agent on one of
these two profiles is moved: a profile an admin chose is left alone. The profile goes through the
same checks as the API's (agents.services), egress included: under `make run` (DJANGO_DEBUG)
loopback is allowed; another private address needs WARRANT_MODEL_ALLOWED_HOSTS or
WARRANT_EGRESS_PRIVATE_NETWORKS.
"""

import os

from django.core.exceptions import ValidationError
from django.core.management.base import CommandError

from agents.backends import HTTP_BACKENDS
from agents.models import Agent, ModelProfile
from agents.services import model_profile_create, model_profile_update

URL_VAR, NAME_VAR = "WARRANT_MODEL_URL", "WARRANT_MODEL_NAME"
KEY_VAR, BACKEND_VAR = "WARRANT_MODEL_API_KEY_ENV", "WARRANT_MODEL_BACKEND"
SCRIPTED, LOCAL = "scripted", "local-model"
# A first connection to a local server is quick or refused; a CPU-only model may take minutes to answer.
LOCAL_DEFAULTS = {"connect_timeout": 3.0, "read_timeout": 180.0, "max_retries": 1, "fallbacks": [SCRIPTED]}


def scripted_profile() -> ModelProfile:
    profile, _ = ModelProfile.objects.get_or_create(name=SCRIPTED, defaults={"backend": "scripted", "model": "scripted-1"})
    return profile


def demo_profile(environ=None) -> ModelProfile:
    """The profile the demo agent should use, made or updated from the environment."""
    environ = os.environ if environ is None else environ
    scripted = scripted_profile()
    url, name = (environ.get(URL_VAR) or "").strip(), (environ.get(NAME_VAR) or "").strip()
    if not url and not name:
        return scripted
    if not url or not name:
        raise CommandError(f"set both {URL_VAR} and {NAME_VAR} (the server's URL and the model's name), or neither")
    backend = (environ.get(BACKEND_VAR) or "openai").strip()
    if backend not in HTTP_BACKENDS:
        raise CommandError(f"{BACKEND_VAR} must be one of {', '.join(sorted(HTTP_BACKENDS))}, not {backend!r}")
    values = {"backend": backend, "base_url": url, "model": name, "api_key_env": (environ.get(KEY_VAR) or "").strip()}
    existing = ModelProfile.objects.filter(name=LOCAL).first()
    try:
        if existing is None:
            return model_profile_create(values=LOCAL_DEFAULTS | values | {"name": LOCAL})
        # What the environment says, over what an admin may have tuned since (timeouts, fallbacks).
        return model_profile_update(profile=existing, values=values)
    except ValidationError as exc:
        problems = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items())
        raise CommandError(f"the model that {URL_VAR} and {NAME_VAR} name cannot be used: {problems}") from None


def point(agent: Agent, profile: ModelProfile) -> None:
    """Move the demo agent to `profile`, unless an admin put it on another profile than these two."""
    if agent.model_profile_id != profile.pk and agent.model_profile.name in (SCRIPTED, LOCAL):
        agent.model_profile = profile
        agent.save(update_fields=["model_profile", "updated_at"])


def describe(profile: ModelProfile) -> str:
    """One line for load_demo to print."""
    if profile.name == SCRIPTED:
        return f"model: scripted (set {URL_VAR} and {NAME_VAR} for a model server)"
    return (f"model: {profile.name}, {profile.backend} {profile.model!r} at {profile.base_url}"
            f"{', falls back to ' + ', '.join(profile.fallbacks) if profile.fallbacks else ''}")
