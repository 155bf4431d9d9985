"""The shape of the code base, read with `ast`: layers, function size, docstrings, privacy.

docs/architecture.md explains the rules these tests hold the code to.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 400  # in the compiled pipeline and the host loop: one job per module
MAX_TRAIN_LINES = 60  # `azjax train`'s loop, read in one screen

# Lowest first: a module may import only from its own layer or lower ones.
LAYERS = {
    "azjax.envs": 0,
    "azjax.config": 0,
    "azjax.core": 1,
    "azjax.model_files": 2,
    "azjax.agent": 2,
    "azjax.engine_player": 2,
    "azjax.alphabeta_player": 2,
    "azjax.evaluation": 3,
    "azjax.training": 4,
    "azjax.apps": 5,
    "azjax.__main__": 5,
    "azjax": 5,  # the package's __init__: the public API, which names every layer's exports
}
# Where every public function, class and method needs a docstring.
DOCUMENTED = ("azjax.core", "azjax.envs", "azjax.model_files", "azjax.agent",
              "azjax.engine_player", "azjax.alphabeta_player")


def _modules() -> dict[str, Path]:
    found = {}
    for package in ("azjax",):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


MODULES = _modules()
TREES = {name: ast.parse(path.read_text(), filename=str(path)) for name, path in MODULES.items()}


def layer_of(module: str) -> int | None:
    """The layer of a dotted module name (its longest listed prefix), None outside azjax/envs."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in LAYERS:
            return LAYERS[prefix]
    return None


def imported_modules(tree: ast.Module, module: str) -> list[tuple[int, str]]:
    """(line, dotted name) of every import anywhere in a module, inside functions included.

    `from azjax.core import search` names `azjax.core.search`; a relative import is resolved
    against `module`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".")[: -node.level] if module in MODULES else []
                base = ".".join([*package, base]) if base else ".".join(package)
            found += [(node.lineno, f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES
                       else base) for alias in node.names]
    return found


def test_every_module_has_a_layer():
    assert [name for name in MODULES if layer_of(name) is None] == []


def test_imports_point_down_the_layers():
    upward = []
    for name, tree in TREES.items():
        own = layer_of(name)
        for line, target in imported_modules(tree, name):
            theirs = layer_of(target)
            if theirs is not None and theirs > own:
                upward.append(f"{MODULES[name].relative_to(ROOT)}:{line} imports {target}")
    assert upward == []


def test_the_layer_check_sees_a_lazy_upward_import():
    tree = ast.parse("def f():\n    from azjax.training.loop import train\n")
    (line, target), = imported_modules(tree, "azjax.core.search")
    assert (line, target) == (2, "azjax.training.loop")
    assert layer_of(target) > layer_of("azjax.core.search")


def _functions(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def test_no_function_is_longer_than_the_limit():
    long = [f"{MODULES[name].relative_to(ROOT)}:{node.lineno} {node.name} "
            f"({node.end_lineno - node.lineno + 1} lines)"
            for name, tree in TREES.items() for node in _functions(tree)
            if node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert long == []


def test_no_module_of_the_core_or_the_training_is_longer_than_the_limit():
    long = [f"{path.relative_to(ROOT)} ({len(path.read_text().splitlines())} lines)"
            for name, path in MODULES.items()
            if name.startswith(("azjax.core.", "azjax.training."))
            and len(path.read_text().splitlines()) > MAX_MODULE_LINES]
    assert long == []


def test_the_training_loop_reads_in_one_screen():
    (train,) = [node for node in _functions(TREES["azjax.training.loop"]) if node.name == "train"]
    assert train.end_lineno - train.lineno + 1 <= MAX_TRAIN_LINES


def _public_definitions(tree: ast.Module):
    """Module-level functions and classes, and the methods of those classes, not private."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name.startswith("_"):
                continue
            yield node.name, node
            if isinstance(node, ast.ClassDef):
                for member in node.body:
                    if (isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef))
                            and not member.name.startswith("_")):
                        yield f"{node.name}.{member.name}", member


@pytest.mark.parametrize("package", DOCUMENTED)
def test_public_functions_and_classes_have_docstrings(package):
    missing = [f"{MODULES[name].relative_to(ROOT)}:{node.lineno} {qualified}"
               for name, tree in TREES.items() if name == package or name.startswith(package + ".")
               for qualified, node in _public_definitions(tree) if not ast.get_docstring(node)]
    assert missing == []


def test_no_private_name_is_imported_from_another_module():
    crossing = [f"{MODULES[name].relative_to(ROOT)}:{node.lineno} {node.module}.{alias.name}"
                for name, tree in TREES.items() for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module
                and layer_of(node.module) is not None
                for alias in node.names
                if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert crossing == []
