"""Parse a SKILL.md document into a ParsedSkill.

Pure: no ORM, no I/O. A SKILL.md is YAML front matter between two `---` lines, followed by a
markdown body that holds the procedure. Every problem raises SkillFormatError with a message
a person editing the file can act on.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import yaml

MAX_BYTES = 100 * 1024
MAX_NAME = 64
MAX_DESCRIPTION = 1024

NAME_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
TOOL_RE = re.compile(r"^[A-Za-z0-9_.\-]+$")
_FENCE_RE = re.compile(r"^---[ \t]*$")


class SkillFormatError(ValueError):
    """A SKILL.md document that cannot become a skill; says where (file, line, field) when it can."""

    def __init__(self, message: str, *, field: str | None = None, line: int | None = None, file: str | None = None):
        super().__init__(message)
        self.message, self.field, self.line, self.file = message, field, line, file

    def at(self, *, file: str | None = None, line: int | None = None, field: str | None = None) -> "SkillFormatError":
        return SkillFormatError(self.message, field=self.field or field, line=self.line or line, file=self.file or file)

    def __str__(self) -> str:
        where = ":".join(str(p) for p in (self.file, self.line) if p)
        if where and self.line:
            where = where if self.file else f"line {self.line}"
        return f"{where}: {self.message}" if where else self.message


@dataclass(frozen=True)
class ParsedSkill:
    name: str
    description: str
    tags: tuple[str, ...]
    allowed_tools: tuple[str, ...]
    inputs: dict
    outputs: dict
    side_effects: tuple[str, ...]
    version: int | None
    body: str
    sha256: str


def parse_skill_md(text: str) -> ParsedSkill:
    if not isinstance(text, str):
        raise SkillFormatError("SKILL.md must be text")
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates survive in str but are not valid UTF-8.
        raise SkillFormatError("SKILL.md must be valid UTF-8 text") from None
    if len(raw) > MAX_BYTES:
        raise SkillFormatError(f"SKILL.md is too large ({len(raw)} bytes; the limit is {MAX_BYTES})")
    if "\x00" in text:
        raise SkillFormatError("SKILL.md must not contain NUL characters")

    front, body = _split(text.lstrip("\ufeff"))
    meta = _load_front_matter(front)
    lines = _key_lines(front)

    def field(name: str, check, *keys: str):
        try:
            return check(meta)
        except SkillFormatError as exc:
            # A nested problem ("outputs.result") points at its own line; otherwise at the key's.
            line = next((lines[k] for k in (exc.field, name, *keys) if k and k in lines), None)
            raise exc.at(field=name, line=line) from None

    body = body.strip()
    if not body:
        raise SkillFormatError("SKILL.md has no body: write the procedure after the front matter", field="body")

    allowed = field("allowed-tools", _allowed_tools, "allowed_tools")
    side_effects = field("side-effects", _side_effects, "side_effects")
    undeclared = [t for t in side_effects if allowed and t not in allowed]
    if undeclared:
        raise SkillFormatError(
            f"front matter: 'side-effects' names {', '.join(undeclared)}, which 'allowed-tools' does not allow",
            field="side-effects", line=lines.get("side-effects", lines.get("side_effects")))
    return ParsedSkill(
        name=field("name", _name),
        description=field("description", _description),
        tags=field("tags", _tags),
        allowed_tools=allowed,
        inputs=field("inputs", lambda m: _contract(m, "inputs")),
        outputs=field("outputs", lambda m: _contract(m, "outputs")),
        side_effects=side_effects,
        version=field("version", _version),
        body=body,
        sha256=hashlib.sha256(raw).hexdigest(),
    )


def _key_lines(front: str) -> dict[str, int]:
    """Line in the file of each top-level front matter key (the file's line 1 is the opening '---')."""
    try:
        node = yaml.compose(front)
    except yaml.YAMLError:
        return {}
    lines: dict[str, int] = {}

    def walk(node, prefix: str) -> None:
        if not isinstance(node, yaml.MappingNode):
            return
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                path = f"{prefix}{key.value}"
                lines[path] = key.start_mark.line + 2
                walk(value, path + ".")

    walk(node, "")
    return lines


CONTRACT_TYPES = ("string", "number", "integer", "boolean", "object", "array")
CONTRACT_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


def _contract(meta: dict, key: str) -> dict:
    """`inputs`/`outputs`: name -> description, or name -> {type, description, required}."""
    value = meta.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise SkillFormatError(f"front matter: '{key}' must map names to a description or to {{type, description, required}}")
    contract = {}
    for name, spec in value.items():
        if not isinstance(name, str) or not CONTRACT_NAME_RE.match(name):
            raise SkillFormatError(f"front matter: '{key}' has an invalid name {name!r} (letters, digits, _)")
        if isinstance(spec, str):
            spec = {"description": spec}
        if not isinstance(spec, dict):
            raise SkillFormatError(f"front matter: '{key}.{name}' must be a description or a mapping",
                                   field=f"{key}.{name}")
        unknown = set(spec) - {"type", "description", "required"}
        if unknown:
            raise SkillFormatError(f"front matter: '{key}.{name}' has unknown keys: {', '.join(sorted(map(str, unknown)))}",
                                   field=f"{key}.{name}")
        kind = spec.get("type", "string")
        if kind not in CONTRACT_TYPES:
            raise SkillFormatError(f"front matter: '{key}.{name}.type' must be one of {', '.join(CONTRACT_TYPES)}",
                                   field=f"{key}.{name}")
        required = spec.get("required", True)
        if not isinstance(required, bool):
            raise SkillFormatError(f"front matter: '{key}.{name}.required' must be true or false",
                                   field=f"{key}.{name}")
        description = spec.get("description", "")
        if not isinstance(description, str):
            raise SkillFormatError(f"front matter: '{key}.{name}.description' must be a string",
                                   field=f"{key}.{name}")
        contract[name] = {"type": kind, "description": description.strip(), "required": required}
    return contract


def _side_effects(meta: dict) -> tuple[str, ...]:
    """Tools with side effects the skill may trigger; `none` (or an empty list) declares it read-only."""
    if "side-effects" in meta and "side_effects" in meta:
        raise SkillFormatError("front matter: give 'side-effects' once, not also as 'side_effects'")
    value = meta.get("side-effects", meta.get("side_effects"))
    if value is None or value == "none" or value == []:
        return ()
    if not isinstance(value, list):
        raise SkillFormatError("front matter: 'side-effects' must be a list of tool names, or none")
    for item in value:
        if not isinstance(item, str) or not TOOL_RE.match(item):
            raise SkillFormatError(f"front matter: 'side-effects' has an invalid tool name: {item!r}")
    return tuple(dict.fromkeys(value))


def _split(text: str) -> tuple[str, str]:
    lines = text.splitlines(keepends=True)
    if not lines or not _FENCE_RE.match(lines[0].rstrip("\r\n")):
        raise SkillFormatError("SKILL.md must start with a '---' front matter block")
    for i in range(1, len(lines)):
        if _FENCE_RE.match(lines[i].rstrip("\r\n")):
            return "".join(lines[1:i]), "".join(lines[i + 1 :])
    raise SkillFormatError("front matter is not closed: add a '---' line after it")


def _load_front_matter(front: str) -> dict:
    try:
        meta = yaml.safe_load(front)
    except yaml.YAMLError as exc:
        raise SkillFormatError(f"front matter is not valid YAML: {_yaml_problem(exc)}") from None
    if meta is None:
        raise SkillFormatError("front matter is empty: 'name' and 'description' are required")
    if not isinstance(meta, dict):
        raise SkillFormatError("front matter must be a mapping of keys to values")
    return meta


def _yaml_problem(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None)
    mark = getattr(exc, "problem_mark", None)
    if not problem:
        return " ".join(str(exc).split())
    if mark is None:
        return problem
    # Marks count from 0 within the front matter; the file has the opening '---' line above it.
    return f"{problem} (line {mark.line + 2}, column {mark.column + 1})"


def _name(meta: dict) -> str:
    value = meta.get("name")
    if value is None:
        raise SkillFormatError("front matter: 'name' is required")
    if not isinstance(value, str):
        raise SkillFormatError("front matter: 'name' must be a string")
    if len(value) > MAX_NAME:
        raise SkillFormatError(f"front matter: 'name' must be at most {MAX_NAME} characters")
    if not NAME_RE.match(value):
        raise SkillFormatError(
            f"front matter: 'name' must be lowercase letters, digits and single hyphens (got {value!r})"
        )
    return value


def _description(meta: dict) -> str:
    value = meta.get("description")
    if value is None:
        raise SkillFormatError("front matter: 'description' is required")
    if not isinstance(value, str):
        raise SkillFormatError("front matter: 'description' must be a string")
    value = value.strip()
    if not value:
        raise SkillFormatError("front matter: 'description' must not be empty")
    if len(value) > MAX_DESCRIPTION:
        raise SkillFormatError(f"front matter: 'description' must be at most {MAX_DESCRIPTION} characters")
    return value


def _tags(meta: dict) -> tuple[str, ...]:
    value = meta.get("tags")
    if value is None:
        return ()
    if not isinstance(value, list):
        raise SkillFormatError("front matter: 'tags' must be a list of strings")
    tags: list[str] = []
    for item in value:
        if not isinstance(item, str) or not item.strip():
            raise SkillFormatError("front matter: 'tags' must be a list of non-empty strings")
        tag = " ".join(item.split())
        if tag not in tags:
            tags.append(tag)
    return tuple(tags)


def _allowed_tools(meta: dict) -> tuple[str, ...]:
    # `allowed_tools` is accepted too: ignoring it silently would drop the skill's tool contract.
    if "allowed-tools" in meta and "allowed_tools" in meta:
        raise SkillFormatError("front matter: give 'allowed-tools' once, not also as 'allowed_tools'")
    value = meta.get("allowed-tools", meta.get("allowed_tools"))
    if value is None:
        return ()
    if isinstance(value, str):
        items = [part for part in re.split(r"[\s,]+", value) if part]
    elif isinstance(value, list):
        items = value
    else:
        raise SkillFormatError("front matter: 'allowed-tools' must be a list of tool names or a string")
    tools: list[str] = []
    for item in items:
        if not isinstance(item, str) or not TOOL_RE.match(item):
            raise SkillFormatError(f"front matter: 'allowed-tools' has an invalid tool name: {item!r}")
        if item not in tools:
            tools.append(item)
    return tuple(tools)


def _version(meta: dict) -> int | None:
    value = meta.get("version")
    if value is None:
        return None
    # bool is an int subclass; `version: yes` is a mistake, not version 1.
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SkillFormatError("front matter: 'version' must be a positive integer")
    return value
