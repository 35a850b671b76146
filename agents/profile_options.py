"""A model profile's request options: max_tokens, temperature and extra_body, checked and applied.

They are the profile's (each profile in a fallback chain sends its own), frozen with the agent
version like the rest of the profile. The model, the API and the admin check them with the
validators here; the HTTP backends put them in the request body with `apply`.

extra_body is for what a server accepts beyond the common fields (`top_k`, `seed`,
`response_format`, vLLM's `repetition_penalty` ...). It is bounded, and it may not set what Warrant itself
decides: the model, the conversation, the tools the model is shown (a list the harness narrows
by role, skill and policy), streaming, the two fields above, or tools a provider runs on its own
side, out of the harness's sight. Nor may it hold a secret: a profile names the variable that
holds its key, and stores no key.
"""

import json
import math
import re

from django.core.exceptions import ValidationError

DEFAULT_MAX_TOKENS = 4096
MAX_TOKENS_LIMIT = 1_000_000
TEMPERATURE_LIMIT = 2.0  # OpenAI's range is 0-2
ANTHROPIC_TEMPERATURE_LIMIT = 1.0  # Anthropic's is 0-1
EXTRA_BODY_MAX_BYTES = 4096
EXTRA_BODY_MAX_KEYS = 32
EXTRA_BODY_MAX_DEPTH = 4

# Set by Warrant, or a way around the tool list the harness decides (functions, provider-side tools).
RESERVED_KEYS = frozenset({
    "model", "messages", "system", "prompt", "tools", "tool_choice", "functions", "function_call",
    "parallel_tool_calls", "stream", "stream_options", "max_tokens", "max_completion_tokens", "temperature",
    "mcp_servers", "web_search_options", "container", "n",
})
# Key names that hold credentials (compared whole, so prompt_cache_key or max_tokens are not among them).
_SECRET_NAME = re.compile(r"^(?:(?:x[_-])?api[_-]?key|(?:access|secret|private)[_-]?key|key|(?:client[_-])?secret|"
                          r"(?:access|auth|bearer|refresh|id)?[_-]?token|password|passwd|authorization|auth|"
                          r"credentials?)$", re.I)


def max_tokens_validator(value) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOKENS_LIMIT:
        raise ValidationError(f"Must be a whole number from 1 to {MAX_TOKENS_LIMIT}, or empty for {DEFAULT_MAX_TOKENS}.")


def temperature_validator(value) -> None:
    if value is None:
        return
    # Written as a positive range check so NaN fails it too.
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= TEMPERATURE_LIMIT:
        raise ValidationError(f"Must be from 0 to {TEMPERATURE_LIMIT:g}, or empty for the server's default.")


def extra_body_validator(value) -> None:
    if value in (None, {}):
        return
    if not isinstance(value, dict):
        raise ValidationError("Must be a JSON object (keys and values added to each request's body).")
    try:
        size = len(json.dumps(value, allow_nan=False, separators=(",", ":")).encode())
    except (ValueError, TypeError):
        raise ValidationError("Must be plain JSON: no NaN or infinite numbers.") from None
    problems = []
    if size > EXTRA_BODY_MAX_BYTES:
        problems.append(f"Is {size} bytes as JSON; at most {EXTRA_BODY_MAX_BYTES}.")
    if len(value) > EXTRA_BODY_MAX_KEYS:
        problems.append(f"Has {len(value)} keys; at most {EXTRA_BODY_MAX_KEYS}.")
    if reserved := sorted(k for k in value if k.lower() in RESERVED_KEYS):
        problems.append(f"May not set {', '.join(reserved)}: Warrant sets the model, the conversation, the tools, "
                        "streaming, max_tokens and temperature (the last two are fields of the profile), and "
                        "provider-side tools would act outside the harness.")
    if secrets := sorted(set(_secret_keys(value))):
        problems.append(f"May not hold a secret ({', '.join(secrets)}): set api_key_env to the name of the "
                        "environment variable holding the key.")
    if _depth(value) > EXTRA_BODY_MAX_DEPTH:
        problems.append(f"Nests deeper than {EXTRA_BODY_MAX_DEPTH} levels.")
    if problems:
        raise ValidationError(problems)


def _secret_keys(value):
    if isinstance(value, dict):
        for key, item in value.items():
            if _SECRET_NAME.match(str(key)):
                yield str(key)
            yield from _secret_keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from _secret_keys(item)


def _depth(value) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def backend_problems(backend: str, temperature) -> dict[str, list[str]]:
    """What one backend's protocol allows beyond the common checks."""
    if backend == "anthropic" and temperature is not None and temperature > ANTHROPIC_TEMPERATURE_LIMIT:
        return {"temperature": [f"The anthropic backend takes 0 to {ANTHROPIC_TEMPERATURE_LIMIT:g}."]}
    return {}


def apply(body: dict, profile: dict) -> dict:
    """The request body with the profile's options: extra_body first, then Warrant's own fields over it
    (a profile stored before these checks cannot replace them either)."""
    extra = profile.get("extra_body")
    merged = {k: v for k, v in extra.items() if k.lower() not in RESERVED_KEYS} if isinstance(extra, dict) else {}
    merged |= body
    max_tokens = profile.get("max_tokens")
    merged["max_tokens"] = max_tokens if _whole(max_tokens) else DEFAULT_MAX_TOKENS
    temperature = profile.get("temperature")
    if isinstance(temperature, (int, float)) and not isinstance(temperature, bool) and math.isfinite(temperature):
        merged["temperature"] = temperature
    return merged


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_TOKENS_LIMIT
