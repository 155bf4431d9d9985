"""Writes docs/config-reference.md from azjax/config.py: every key's type, default, valid values,
meaning, and whether it may change when a run resumes.

Types and defaults come from the dataclasses themselves (`dataclasses.fields`, type hints);
meanings and valid values from the string under each field in azjax/config.py (its closing
`Valid: ...`), read with `ast`; resumability from `azjax.config.free_on_resume`.

    python tools/config_reference.py           # rewrite docs/config-reference.md
    python tools/config_reference.py --check   # exit 1 if the page is not what this writes
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import re
import sys
import typing
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from azjax import config as config_module  # noqa: E402  (after the path is set)

PAGE = ROOT / "docs" / "config-reference.md"
VALID_MARK = "Valid:"


@dataclasses.dataclass(frozen=True)
class Key:
    """One row of the reference: a config key and what the page says about it."""

    key: str  # "section.name", or "name" at the top level
    type: str
    default: str
    valid: str
    meaning: str
    resume: str  # "may change" or "fixed"


# ---- reading config.py ---------------------------------------------------------------------------


@functools.cache
def _source_tree() -> ast.Module:
    return ast.parse(Path(inspect.getsourcefile(config_module)).read_text())


def field_docs(cls: type) -> dict[str, str]:
    """The string under each field of `cls` in its source, whitespace folded to single spaces."""
    node = next(n for n in _source_tree().body
                if isinstance(n, ast.ClassDef) and n.name == cls.__name__)
    docs = {}
    for statement, following in zip(node.body, node.body[1:], strict=False):
        if (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)):
            docs[statement.target.id] = " ".join(following.value.value.split())
    return docs


def split_doc(text: str) -> tuple[str, str]:
    """(meaning, valid values) of a field's string: the part before `Valid:` and after it."""
    meaning, _, valid = text.partition(VALID_MARK)
    return meaning.strip(), valid.strip().removesuffix(".")


def sections() -> list[tuple[str, type]]:
    """(name, dataclass) of every section of `ExperimentConfig`, in the order of its fields."""
    hints = typing.get_type_hints(config_module.ExperimentConfig)
    return [(f.name, hints[f.name]) for f in dataclasses.fields(config_module.ExperimentConfig)
            if dataclasses.is_dataclass(hints[f.name])]


# ---- one key -------------------------------------------------------------------------------------


def type_text(annotation: Any) -> str:
    """The YAML type a key takes: `int`, `float`, `bool`, `str` or `list of <type>`."""
    if typing.get_origin(annotation) is Literal:
        return "str"
    if typing.get_origin(annotation) is tuple:
        return f"list of {type_text(typing.get_args(annotation)[0])}"
    return annotation.__name__


def default_text(value: Any) -> str:
    """A default as it would be written in a YAML config."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "[" + ", ".join(default_text(v) for v in value) + "]"
    if isinstance(value, str):
        return value or '""'
    return repr(value)


def valid_text(annotation: Any, stated: str) -> str:
    """The values a key accepts: a Literal's choices, true/false, or what its string states."""
    if typing.get_origin(annotation) is Literal:
        choices = ", ".join(f"`{c}`" for c in typing.get_args(annotation))
        return f"one of {choices}" + (f"; {stated}" if stated else "")
    if annotation is bool:
        return "true or false" + (f"; {stated}" if stated else "")
    if stated:
        return stated
    return {int: "any integer", float: "any number", str: "any string"}.get(annotation, "any")


def key_rows(cls: type, prefix: str) -> list[Key]:
    """The rows of `cls`'s fields that are not sections, keys named `prefix + name`."""
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    rows = []
    for f in dataclasses.fields(cls):
        annotation = hints[f.name]
        if dataclasses.is_dataclass(annotation):
            continue
        meaning, stated = split_doc(docs.get(f.name, ""))
        key = prefix + f.name
        rows.append(Key(key=key, type=type_text(annotation), default=default_text(f.default),
                        valid=valid_text(annotation, stated), meaning=meaning,
                        resume="may change" if config_module.free_on_resume(key) else "fixed"))
    return rows


def all_rows() -> dict[str, list[Key]]:
    """Every key of the config, by section ("" for the top level)."""
    rows = {"": key_rows(config_module.ExperimentConfig, "")}
    for name, cls in sections():
        rows[name] = key_rows(cls, name + ".")
    return rows


# ---- the page ------------------------------------------------------------------------------------


def _cell(text: str, keys: tuple[str, ...] = ()) -> str:
    """`text` for a table cell: pipes escaped, the config keys it names (`keys`) as code."""
    for key in keys:
        text = re.sub(rf"(?<![`\w.]){re.escape(key)}(?![\w`])", f"`{key}`", text)
    return text.replace("|", "\\|")


def table(rows: list[Key], keys: tuple[str, ...]) -> list[str]:
    """A Markdown table of `rows`; `keys`, every full key, are set as code where named."""
    lines = ["| key | type | default | valid values | on resume | meaning |",
             "|---|---|---|---|---|---|"]
    for row in rows:
        name = row.key.rsplit(".", 1)[-1]
        lines.append(f"| `{name}` | {row.type} | `{_cell(row.default)}` "
                     f"| {_cell(row.valid, keys)} | {row.resume} | {_cell(row.meaning, keys)} |")
    return lines


def _class_doc(cls: type) -> str:
    return " ".join((cls.__doc__ or "").split())


INTRO = """\
# Config reference

<!-- Generated from azjax/config.py by `python tools/config_reference.py`: edit the strings
under the fields there, then rerun it; `--check` tells whether this page is current. -->

An experiment is one YAML file: `azjax train FILE` trains it, and `azjax.load_config(FILE)`
reads it in Python. This page lists every key, its type, its default, the values the
validation accepts, whether it may change when a run resumes, and what it does.

## Layout of a config file

The top level holds {top}; everything else sits in one mapping per section
({sections}):

```yaml
game: connect_four
seed: 0
network:
  kind: resnet
  channels: 64
search:
  num_simulations: 32
budget:
  max_wall_s: 3600
```

A key left out takes its default. An unknown key, a value of the wrong type or one outside
its valid values is refused with an error that names the key (an unknown key's error lists the
known keys of its section), when the config loads or, where a row says so, when training
starts; either way before anything trains. Lists are YAML lists (`hidden: [256, 256]`), and a
float may be written `1e-3`.

## `game:`: a built-in game or one of your own

```yaml
game: connect_four                  # a registered id
game: pgx:othello                   # a pgx game (needs the pgx package)
game: mygames.othello4:Othello4     # a subclass of envs.Env, or a function returning one
game:                               # one that takes keyword arguments
  import: mygames.othello4:Othello4
  kwargs: {{size: 4}}
```

A name is resolved in this order: the registered ids (`envs.available()`, those added with
`envs.register` included), then `pgx:<id>`, then import paths `module.sub:Attr`, then the
entry points of the `azjax.games` group, through which an installed package ships games
without touching azjax:

```toml
[project.entry-points."azjax.games"]
othello4 = "mygames.othello4:Othello4"
```

The module of an import path is looked up in the installed packages, then in the config
file's own directory, then in the working directory. The mapping form is kept as the string
`mygames.othello4:Othello4(size=4)` (keyword arguments sorted, as Python literals), which a
config may also hold directly; `envs.make` takes the same strings. A game of your own is
checked with `envs.check_env` when the config loads, before anything is compiled or written.
A module that is not found or fails to import, a missing attribute, an object that is not an
`Env` class or factory, and a failed check each stop `azjax train` with one line naming them.

A run records the game's spec and, for a module outside the installed packages, the directory
it was found in (`game_dir`), in its `config.yaml` and in every model it writes. `azjax eval`,
`azjax play`, `azjax serve --game`, `azjax export` and `Agent.load` then import the game from
there, from any working directory (and a model kept beside its game's module, from the folder
that holds it). Loading a run dir or a model of a game of your own imports its module and so
runs its code: load only those whose code you trust.

## `base:`: start from another file

```yaml
base: ../connect_four.yaml    # a path relative to this file
search:
  num_simulations: 64         # only what changes
```

The file is laid over its base: sections merge key by key, lists and scalars replace. A base
may have its own `base:`; files that include each other are refused. A run saves the resolved
config, without any `base:` key, as `config.yaml` in its run dir.

## `--set`: change a key on the command line

```bash
azjax train experiments/connect_four.yaml --set search.num_simulations=32 \\
    --set "eval.opponents=[random, mcts:100]"
```

Each `--set section.key=value` (repeatable) applies after the `base:` chain; the value is read
as YAML (`true`, `0.5`, `[128, 128]`) and validated like one written in the file. `azjax eval`
and `azjax export` take `--set` too, for how the agent they load searches (its network and
game stay).

## Resuming a run

`azjax train` on a run dir that holds a checkpoint resumes it. What is trained stays as saved:
a resumed run may change only the keys marked "may change" in the tables below: the budget,
checkpoint and evaluation settings, which do not change what is trained (evaluations draw their
own random keys); the learning-rate schedule's length and floor, so that a schedule can be fitted
to a longer or shorter budget (the new one applies from the resumed update step on); and how
update steps are grouped into compiled calls. Gating is fixed, since it decides which params
self-play uses. In full, the keys matching one of `azjax.config.RESUME_FREE_KEYS`,

    {free}

except those matching one of `azjax.config.RESUME_FIXED_KEYS`,

    {fixed}

A different value of a fixed key is refused, with the list of differences; the free keys that
changed are printed and recorded in the run's `metrics.jsonl`. For example, run again with
`--set budget.max_wall_s=7200`, `azjax train experiments/connect_four.yaml` resumes its run in
`runs/connect_four` with a two-hour budget.
"""


def render() -> str:
    """The whole page."""
    rows = all_rows()
    keys = tuple(row.key for section in rows.values() for row in section if "." in row.key)
    quote = lambda patterns: " ".join(patterns)
    top = [row.key for row in rows[""]]
    named = [f"`{key}`" for key in top]
    lines = [INTRO.format(top=", ".join(named[:-1]) + " and " + named[-1],
                          sections=", ".join(f"`{name}`" for name, _ in sections()),
                          free=quote(config_module.RESUME_FREE_KEYS),
                          fixed=quote(config_module.RESUME_FIXED_KEYS))]
    lines += ["## Top level", "", _class_doc(config_module.ExperimentConfig), "",
              *table(rows[""], keys), ""]
    for name, cls in sections():
        lines += [f"## `{name}`", "", _class_doc(cls), "", *table(rows[name], keys), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Writes the page, or with --check reports whether it is current (exit status 1 if not)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 if docs/config-reference.md differs from what it would write")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        if not PAGE.is_file() or PAGE.read_text() != text:
            print(f"{PAGE.relative_to(ROOT)} is stale: run python tools/config_reference.py",
                  file=sys.stderr)
            return 1
        print(f"{PAGE.relative_to(ROOT)} is current")
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
