"""The layout's rules, read from the source with the ast module.

- core/ imports no app: it is what every app shares.
- The apps depend on one another in one direction (ALLOWED below), at module level, so there is
  no import cycle between apps; nor is there one between the modules themselves.
- A module (migrations aside; tests and benchmarks included) has at most MAX_LINES lines; the
  few over it are listed in OVER_THE_LIMIT with their size at the time, and may only shrink.
- No private internals of CPython or Django: no private modules (`_sre`), no private attributes
  of a stdlib or Django module (`re._casefix`), no `django.db.models.sql`, no writes to `_meta`,
  none of the ORM's and admin's private methods (`._raw_delete`, `admin.site._registry`).
"""

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("core", "governance", "agents", "skills", "runs", "review", "evals", "triggers", "warrant",
            "warrant_verify")
APPS = {"governance", "agents", "skills", "runs", "review", "evals", "triggers", "warrant"}

# Which packages each may import at module level. governance's policies are scoped to agents and tools
# and its dry run matches skills, so it sits above agents and skills; runs uses all of them;
# warrant, the project package, wires everything together.
ALLOWED = {
    "core": set(),
    "agents": {"core"},
    "skills": {"core"},
    "governance": {"core", "agents", "skills"},
    "runs": {"core", "agents", "skills", "governance", "warrant_verify"},
    "review": {"core", "agents", "skills", "governance", "runs", "warrant_verify"},  # the dashboard reads runs
    "evals": {"core", "agents", "skills", "governance", "runs"},  # golden cases run through the harness
    "triggers": {"core", "agents", "skills", "governance", "runs"},  # a schedule or webhook starts a run
    "warrant": {"core", "agents", "skills", "governance", "runs", "review", "warrant_verify"},
    "warrant_verify": set(),  # the standalone verifier: the standard library and `cryptography` only
}

# Module-level imports against the direction that are tolerated for now: may only go (none today).
KNOWN_CROSSINGS: list[tuple[str, str]] = []

MAX_LINES = 400
# Modules over the limit, each with a cap at its size when it was listed: lower a cap when the
# module shrinks, and drop the entry once it is under MAX_LINES. Never raise one.
OVER_THE_LIMIT: dict[str, int] = {}

# Module cycles that are tolerated for now: may only shrink (none today).
KNOWN_CYCLES: list[list[str]] = []

# Stdlib and Django packages whose private names are off limits.
GUARDED_ROOTS = {"re", "sre_compile", "sre_parse", "sys", "os", "json", "socket", "ssl", "sqlite3", "django"}
# Private methods and attributes of Django's querysets, models and admin site, on whatever object.
DJANGO_PRIVATE_ATTRIBUTES = {
    "_raw_delete", "_insert", "_batched_insert", "_do_insert", "_do_update", "_save_table", "_result_cache",
    "_prefetch_related_lookups", "_known_related_objects", "_for_write", "_iterable_class", "_hints", "_registry",
}


def _module_files() -> list[Path]:
    files = []
    for package in PACKAGES:
        files += [path for path in (ROOT / package).rglob("*.py") if "migrations" not in path.parts]
    return sorted(files)


def _sized_files() -> list[Path]:
    """Every module the line limit holds for: the packages', and the tests' and benchmarks' too."""
    extra = [path for folder in ("tests", "bench") for path in (ROOT / folder).rglob("*.py")]
    return sorted(set(_module_files()) | set(extra))


def _name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The dotted names an import statement imports, relative imports resolved."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[:len(base) - node.level + 1]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module or ""
    return [source] + [f"{source}.{alias.name}" for alias in node.names if alias.name != "*"]


def _module_level_imports(tree: ast.Module):
    """Import statements run when the module is imported: not those inside a function."""
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        else:
            pending.extend(ast.iter_child_nodes(node))


def _all_imports(tree: ast.Module):
    return (node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)))


@cache
def _modules() -> dict[str, Path]:
    return {_name(path): path for path in _module_files()}


def _edges(imports_of) -> dict[str, set[str]]:
    """Module -> the project modules it imports (a `from x import y` counts as x.y when that is
    a module, else x)."""
    modules, edges = _modules(), {}
    for module, path in modules.items():
        targets = set()
        for node in imports_of(_tree(path)):
            for name in _imported(node, module, path.name == "__init__.py"):
                if name in modules and name != module:
                    targets.add(name)
        edges[module] = targets
    return edges


def _top(module: str) -> str:
    return module.split(".")[0]


def test_core_imports_no_app():
    found = []
    for module, path in _modules().items():
        if _top(module) != "core":
            continue
        for node in _all_imports(_tree(path)):
            found += [f"{module}: {name}" for name in _imported(node, module, path.name == "__init__.py")
                      if _top(name) in APPS]
    assert found == []


def test_apps_import_each_other_only_in_the_allowed_direction():
    found = sorted({f"{_top(source)} -> {_top(target)} ({source} imports {target})"
                    for source, target in _crossings() if (source, target) not in KNOWN_CROSSINGS})
    assert found == []


def _crossings() -> set[tuple[str, str]]:
    return {(source, target) for source, targets in _edges(_module_level_imports).items() for target in targets
            if _top(target) != _top(source) and _top(target) not in ALLOWED[_top(source)]}


@pytest.mark.parametrize(("source", "target"), KNOWN_CROSSINGS)
def test_a_known_crossing_is_still_there(source, target):
    """Once a listed import is gone its entry goes, so the list can only shrink."""
    assert (source, target) in _crossings(), f"drop {source} -> {target} from KNOWN_CROSSINGS"


def test_the_allowed_graph_has_no_cycle():
    def reaches(start: str, goal: str, seen=()) -> bool:
        return any(nxt == goal or (nxt not in seen and reaches(nxt, goal, (*seen, nxt))) for nxt in ALLOWED[start])

    assert [app for app in ALLOWED if reaches(app, app)] == []


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle_between_modules():
    assert [cycle for cycle in _cycles(_edges(_module_level_imports)) if cycle not in KNOWN_CYCLES] == []


@pytest.mark.parametrize("cycle", KNOWN_CYCLES)
def test_a_known_cycle_is_still_there(cycle):
    """Once a listed cycle is broken its entry goes, so the list can only shrink."""
    assert cycle in _cycles(_edges(_module_level_imports))


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_no_module_is_over_the_limit():
    over = {str(path.relative_to(ROOT)): _lines(path) for path in _sized_files()}
    too_long = {name: lines for name, lines in over.items()
                if lines > OVER_THE_LIMIT.get(name, MAX_LINES)}
    assert too_long == {}, f"split these (one concept per module, at most {MAX_LINES} lines)"


@pytest.mark.parametrize("name", sorted(OVER_THE_LIMIT))
def test_a_listed_module_is_still_over_the_limit(name):
    """Once a listed module is under the limit (or gone) its entry goes, so the list can only shrink."""
    path = ROOT / name
    assert path.exists() and _lines(path) > MAX_LINES, f"drop {name} from OVER_THE_LIMIT"


def _private_uses(tree: ast.Module, module: str, is_package: bool) -> list[str]:
    found = []
    guarded_names = {}  # a local name bound to a stdlib or Django module -> that module
    for node in _all_imports(tree):
        for name in _imported(node, module, is_package):
            parts = name.split(".")
            if _top(name) in PACKAGES or _top(name) == "__future__":
                continue
            if any(part.startswith("_") for part in parts):
                found.append(f"imports the private {name}")
            if name == "django.db.models.sql" or name.startswith("django.db.models.sql."):
                found.append(f"imports the ORM's query compiler {name}")
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in GUARDED_ROOTS:
                    guarded_names[alias.asname or alias.name.split(".")[0]] = alias.name
        elif node.module and not node.level and node.module.split(".")[0] in GUARDED_ROOTS:
            for alias in node.names:
                guarded_names.setdefault(alias.asname or alias.name, f"{node.module}.{alias.name}")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name) and node.value.id in guarded_names):
            found.append(f"uses the private {guarded_names[node.value.id]}.{node.attr}")
        if isinstance(node, ast.Attribute) and node.attr in DJANGO_PRIVATE_ATTRIBUTES:
            found.append(f"uses Django's private .{node.attr} (line {node.lineno})")
        targets = (node.targets if isinstance(node, ast.Assign)
                   else [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        for target in targets:
            if any(isinstance(part, ast.Attribute) and part.attr == "_meta" for part in ast.walk(target)):
                found.append(f"writes to a model's _meta (line {node.lineno})")
    return found


def test_no_private_internals_of_cpython_or_django():
    found = {}
    for module, path in _modules().items():
        if uses := _private_uses(_tree(path), module, path.name == "__init__.py"):
            found[module] = uses
    assert found == {}


@pytest.mark.parametrize(("source", "why"), [
    ("import _sre", "imports the private _sre"),
    ("import re\nre._casefix", "uses the private re._casefix"),
    ("from re import _casefix", "imports the private re._casefix"),
    ("from django.db.models.sql import Query", "imports the ORM's query compiler django.db.models.sql"),
    ("Policy._meta.ordering = []", "writes to a model's _meta (line 1)"),
    ("Receipt.objects.all()._raw_delete('default')", "uses Django's private ._raw_delete (line 1)"),
    ("admin.site._registry", "uses Django's private ._registry (line 1)"),
])
def test_the_private_internals_check_sees(source, why):
    assert why in _private_uses(ast.parse(source), "governance.example", False)


def test_the_private_internals_check_leaves_public_and_own_names_alone():
    source = "import re\nfrom core import text\nre.compile('x')\ntext._TABLES\nPolicy._meta.get_field('name')"
    assert _private_uses(ast.parse(source), "governance.example", False) == []
