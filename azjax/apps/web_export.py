"""`azjax export MODEL --web DIR`: a model that plays in the browser, search included, with no
server: a folder of static files for any static file server, working offline once loaded.

What is exported, and why this way (docs/play-and-serve.md, "A page with no server"):
- The game's own JAX functions and the network become ONNX graphs (jax2onnx), run in the page
  by onnxruntime-web's WebAssembly build: no game is rewritten in JavaScript.
    game/network.onnx    obs [B, ...] -> policy logits [B, A], value [B] (the model's search
                         network: symmetry averaging and prior temperature included)
    game/describe.onnx   state -> board codes, observation, legal mask, player to move, done,
                         rewards, forcing and, with an endgame table, whether it knows the
                         position: everything the page and the searches read of a position
                         but the table's result
    game/step.onnx       (state, action) -> the next state: the rules as played, and what
                         describe.onnx says of it but its board codes (alpha-beta's step)
    game/steps.onnx      for an alpha-beta model: (state, actions [K]) -> step.onnx's
                         outputs for K actions at once, each with a leading [K] (alpha-beta's
                         children after the first: the runtime's cost is per operation,
                         nearly the same for K as for 1); left out, the page stepping one
                         action a call, where the game's step does not batch into ONNX
    game/tree_step.onnx  (state, action) -> the next state, the mover's reward, the discount,
                         its observation, legal mask, done and, with a table, whether it knows
                         the position: the step the search's tree takes (with
                         `search.play_forced_moves`, forced moves played at once)
    game/table.onnx      with `search.endgame_table` (up to `WEB_TABLE_PIECES` pieces): state
                         -> whether the endgame table knows it, and its result for the player
                         to move; the table is a constant of the graph
  A state crosses the graphs as its flattened leaves, in `jax.tree.leaves` order; their names,
  dtypes and shapes, and the initial state's values, are in game/game.json.
- The searches are written once for every game, over those graphs, for one game:
  `azjax/apps/static/search.js`, azjax's greedy tree search (Gumbel or PUCT), a position at a
  time, and `azjax/apps/static/alphabeta.js`, its alpha-beta over the network, which asks
  for a position's moves after its first together (steps.onnx, one network call). A model
  that searches by alpha-beta plays it at the page's times per move, and its network's Gumbel
  search at the simulation counts, as `azjax serve` does.
- The page is `azjax serve`'s own (`azjax/apps/static/`): `web.js` answers what the server's
  API would, from the graphs, so the two pages cannot drift.

Before it writes anything the export replays random games through the ONNX graphs in
onnxruntime (Python) and compares every output with JAX's, so a graph that would play other
rules than the game's is refused, not shipped.
"""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from azjax.agent import Agent
from azjax.apps.serve import MOVETIMES, SIMULATIONS
from azjax.apps.turns import model_label
from azjax.core.endgames import endgame_adjudicator
from azjax.core.network import make_network
from azjax.core.search import search_apply_fn, tree_env
from azjax.core.search_alphabeta import LEAF_SCALE, alphabeta_searcher
from azjax.envs.core import Env

__all__ = ["ORT_FILES", "WebExportError", "export_web", "find_onnxruntime_web"]

STATIC_DIR = Path(__file__).resolve().parent / "static"
WEB_TABLE_PIECES = 4  # a page downloads its table: 9.7 MB at 4 pieces, 431 MB at 5
PAGE_FILES = ("index.html", "app.js", "style.css", "search.js", "alphabeta.js", "web.js")
# onnxruntime-web's WebAssembly build: the module the page imports and the runtime it loads.
ORT_FILES = ("ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm")
ORT_VERSION = "1.31.1"  # package.json pins the same
_REPO_ROOT = Path(__file__).resolve().parents[2]
_CHECK_GAMES = 4  # random games replayed through the graphs before they are written
_CHECK_PLIES = 60
_CHECK_ENDINGS = 64  # random endings checked against the endgame table's graph
STEPS_BATCH = 8  # steps.onnx's actions a call: a draughts middle game has about 8 moves


class WebExportError(ValueError):
    """A model or game that cannot be exported for the browser; the message says which part
    and why, in one line."""


def find_onnxruntime_web(ort_dir: str | Path | None = None) -> Path:
    """The folder holding onnxruntime-web's `dist` files (`ORT_FILES`).

    Args:
      ort_dir: that folder, or a folder with `node_modules/onnxruntime-web` in it; None: the
        azjax checkout's `node_modules` (`npm ci` in the checkout installs it).

    Raises:
      WebExportError: the files are not there, saying how to install them.
    """
    candidates = [Path(ort_dir)] if ort_dir else [_REPO_ROOT]
    for base in candidates:
        for folder in (base, base / "dist", base / "node_modules" / "onnxruntime-web" / "dist"):
            if all((folder / name).is_file() for name in ORT_FILES):
                return folder
    where = ort_dir or _REPO_ROOT
    raise WebExportError(
        f"onnxruntime-web's files ({', '.join(ORT_FILES)}) are not in {where}: run `npm ci` in "
        f"the azjax checkout, or `npm install onnxruntime-web@{ORT_VERSION}` and pass --ort "
        "node_modules/onnxruntime-web/dist")


def _state_spec(state: Any) -> tuple[list[jax.ShapeDtypeStruct], Any]:
    leaves, treedef = jax.tree.flatten(state)
    return [jax.ShapeDtypeStruct(np.shape(x), np.asarray(x).dtype) for x in leaves], treedef


def _game_functions(agent: Agent) -> dict[str, tuple[Callable, list, list[str], list[str]]]:
    """name -> (flat function, input specs, input names, output names) of every graph."""
    env, config = agent.env, agent.config
    walker = tree_env(env, config.search)
    specs, treedef = _state_spec(env.init(jax.random.PRNGKey(0)))
    state_names = [f"s{i}" for i in range(len(specs))]
    next_names = [f"next_s{i}" for i in range(len(specs))]
    action = jax.ShapeDtypeStruct((), jnp.int32)
    adjudicate = endgame_adjudicator(env, config.search)
    known_names = ["known"] if adjudicate else []  # whether the table knows the position
    seen_names = ["obs", "legal", "player", "done", "rewards", "forcing", *known_names]

    def unflatten(leaves):
        return jax.tree.unflatten(treedef, list(leaves))

    def known(state):  # with a table, whether it knows the live state (not its result)
        done = state.terminated | state.truncated
        return (~done & adjudicate(state).terminated,) if adjudicate else ()

    def seen(state):
        """What the searches read of a position: obs, legal, player, done, rewards, forcing,
        known."""
        done = state.terminated | state.truncated
        return (env.observe(state).astype(jnp.float32), state.legal_action_mask,
                state.current_player.astype(jnp.int32), done, state.rewards.astype(jnp.float32),
                ~done & env.forcing(state), *known(state))

    def describe(*leaves):
        state = unflatten(leaves)
        return (env.board_codes(state).astype(jnp.int32), *seen(state))

    def step(*args):
        after = env.step(unflatten(args[:-1]), args[-1])
        return (*jax.tree.leaves(after), *seen(after))

    def steps(*args):
        return jax.vmap(step, in_axes=(*[None] * len(specs), 0))(*args)

    def tree_step(*args):
        state = unflatten(args[:-1])
        after = walker.step(state, args[-1])
        mover = state.current_player
        done = after.terminated | after.truncated
        discount = jnp.where(done, 0.0, jnp.where(after.current_player == mover, 1.0, -1.0))
        return (*jax.tree.leaves(after), after.rewards[mover].astype(jnp.float32),
                discount.astype(jnp.float32), walker.observe(after).astype(jnp.float32),
                after.legal_action_mask, done, *known(after))

    _, apply_fn = make_network(config.network, env.num_actions,
                               matmul_dtype=config.search.matmul_dtype)
    apply_fn = search_apply_fn(env, apply_fn, config.search)
    variables = {"params": agent.params}

    def network(obs):
        logits, value = apply_fn(variables, obs)
        return logits.astype(jnp.float32), value.astype(jnp.float32)

    (batch,) = jax.export.symbolic_shape("batch")
    obs = jax.ShapeDtypeStruct((batch, *env.observation_shape), jnp.float32)
    graphs = {
        "describe": (describe, specs, state_names, ["codes", *seen_names]),
        "step": (step, [*specs, action], [*state_names, "action"], [*next_names, *seen_names]),
        "tree_step": (tree_step, [*specs, action], [*state_names, "action"],
                      [*next_names, "reward", "discount", "obs", "legal", "done",
                       *known_names]),
        "network": (network, [obs], ["obs"], ["logits", "value"]),
    }
    if config.search.algorithm == "alphabeta":
        actions = jax.ShapeDtypeStruct((steps_batch(env),), jnp.int32)
        graphs["steps"] = (steps, [*specs, actions], [*state_names, "actions"],
                           [*next_names, *seen_names])
    if adjudicate is not None:
        def table(*leaves):
            state = unflatten(leaves)
            value = adjudicate(state).rewards[state.current_player]
            return (*known(state), value.astype(jnp.float32))

        graphs["table"] = (table, specs, state_names, ["known", "value"])
    return graphs


def steps_batch(env: Env) -> int:
    """K, the actions of one steps.onnx call: `STEPS_BATCH`, or every action of a game with
    fewer."""
    return min(env.num_actions, STEPS_BATCH)


def _check_supported(agent: Agent) -> None:
    env, search = agent.env, agent.config.search
    if not env.board_cells():
        raise WebExportError(
            f"{env.name} gives no board_cells / board_codes, which the page draws its board "
            "from: add them to the game (docs/new-game.md)")
    unsupported = [(name, off) for name, value, off in (
        ("search.contempt", search.contempt, "0"),
        ("search.material_utility", search.material_utility, "0"),
        ("search.solver", search.solver, "false"),
        ("search.tree_reuse", search.tree_reuse, "false"),
        ("search.endgame_table", search.endgame_table > WEB_TABLE_PIECES, str(WEB_TABLE_PIECES)),
        ("search.quiescence", search.quiescence, "0")) if value]
    if unsupported:
        names = ", ".join(name for name, _ in unsupported)
        fix = " ".join(f"--set {name}={off}" for name, off in unsupported)
        verb = "is" if len(unsupported) == 1 else "are"
        raise WebExportError(f"{names} {verb} not played in the browser: export with {fix}")


def _to_onnx(name: str, env: Env, fn: Callable, specs: list, inputs: list[str],
             outputs: list[str]) -> Any:
    """The ONNX model of `fn`, bool `Where`s rewritten (onnxruntime has no kernel for them)."""
    import logging

    from jax2onnx import to_onnx

    # onnx_ir warns of values whose type it leaves unset; the runtime check below decides.
    logging.getLogger("onnx_ir").setLevel(logging.ERROR)
    # jax2onnx traces with primitives of its own, which JAX's tracing caches (a while loop's
    # body, say) would otherwise hand to later jitted code: clear them on both sides.
    jax.clear_caches()
    try:
        model = to_onnx(fn, specs, model_name=f"{env.name}_{name}")
    except Exception as error:  # jax2onnx names the primitive it cannot convert
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise WebExportError(f"{env.name}'s {name} cannot be exported to ONNX: {first}") from None
    finally:
        jax.clear_caches()
    return _named(_without_dead_nodes(_bool_where_as_logic(model)), inputs, outputs)


def _without_dead_nodes(model: Any) -> Any:
    """`model` without the nodes and constants that no output needs (jax2onnx keeps both
    branches of a `lax.cond` whose result is unused: a graph that says whether the endgame
    table knows a position would otherwise carry the table)."""
    from onnx import AttributeProto

    def read(nodes) -> Iterator[str]:  # every name a node reads, in its subgraphs too
        for node in nodes:
            yield from node.input
            for attribute in node.attribute:
                if attribute.type == AttributeProto.GRAPH:
                    yield from read(attribute.g.node)
                    yield from (value.name for value in attribute.g.output)

    graph = model.graph
    while True:
        needed = {value.name for value in graph.output} | set(read(graph.node))
        live = [node for node in graph.node if any(name in needed for name in node.output)]
        if len(live) == len(graph.node):
            break
        del graph.node[:]
        graph.node.extend(live)
    constants = [c for c in graph.initializer if c.name in needed]
    del graph.initializer[:]
    graph.initializer.extend(constants)
    return model


def _named(model: Any, inputs: list[str], outputs: list[str]) -> Any:
    """`model` with its inputs and outputs renamed, in order: an output that is an input
    passed through, or another output, gets an `Identity` of its own."""
    from onnx import helper

    graph = model.graph
    renamed = {old.name: new for old, new in zip(graph.input, inputs, strict=True)}
    for node in graph.node:
        node.input[:] = [renamed.get(name, name) for name in node.input]
    for value, new in zip(graph.input, inputs, strict=True):
        value.name = new
    for value, new in zip(graph.output, outputs, strict=True):
        graph.node.append(helper.make_node("Identity", [renamed.get(value.name, value.name)],
                                           [new]))
        value.name = new
    return model


def _bool_where_as_logic(model: Any) -> Any:
    """`model` with each `Where` over bool tensors, in its graph and in loop bodies, written
    as `(c and x) or (not c and y)`."""
    import onnx

    model = onnx.shape_inference.infer_shapes(model)
    _rewrite_bool_where(model.graph, {}, itertools.count())
    return model


def _rewrite_bool_where(graph: Any, outer: dict[str, int], serial: Iterator[int]) -> None:
    from onnx import AttributeProto, TensorProto, helper

    types = dict(outer)
    types.update({v.name: v.type.tensor_type.elem_type
                  for v in [*graph.value_info, *graph.input, *graph.output]})
    types.update({t.name: t.data_type for t in graph.initializer})
    nodes = []
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == AttributeProto.GRAPH:
                _rewrite_bool_where(attribute.g, types, serial)
        if node.op_type != "Where" or types.get(node.input[1]) != TensorProto.BOOL:
            nodes.append(node)
            continue
        (cond, yes, no), out = node.input, node.output[0]
        tag = f"bool_where_{next(serial)}"  # names unique across the loop bodies too
        nodes += [helper.make_node("And", [cond, yes], [f"{tag}_yes"]),
                  helper.make_node("Not", [cond], [f"{tag}_not"]),
                  helper.make_node("And", [f"{tag}_not", no], [f"{tag}_no"]),
                  helper.make_node("Or", [f"{tag}_yes", f"{tag}_no"], [out])]
    del graph.node[:]
    graph.node.extend(nodes)


def _check_graphs(agent: Agent, graphs: dict[str, bytes], functions: dict) -> None:
    """Replays random games through the graphs in onnxruntime and compares every output with
    the JAX function's: integers and booleans (states, codes, masks) exactly, floats within
    1e-6 (observations, rewards) or 1e-4 (the network)."""
    import onnxruntime as ort

    env = agent.env
    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only: unused constants are the converter's
    runners = {}
    for name, data in graphs.items():
        try:
            runners[name] = ort.InferenceSession(data, options,
                                                  providers=["CPUExecutionProvider"])
        except Exception as error:  # the runtime names the node it has no kernel for
            first = str(error).strip().splitlines()[0]
            raise WebExportError(f"{env.name}'s exported {name} does not load in onnxruntime: "
                                 f"{first}") from None
    jitted = {name: jax.jit(functions[name][0]) for name in functions}
    rng = np.random.default_rng(0)

    def compare(name: str, args: list) -> list:
        runner = runners[name]
        feeds = {i.name: np.asarray(a) for i, a in zip(runner.get_inputs(), args, strict=True)}
        got = runner.run(None, feeds)
        want = [np.asarray(x) for x in jitted[name](*args)]
        for output, x, y in zip(runner.get_outputs(), got, want, strict=True):
            tolerance = 1e-4 if name == "network" else 1e-6  # floats: the order of operations
            same = x.shape == y.shape and (
                np.allclose(x, y, atol=tolerance, rtol=tolerance)
                if np.issubdtype(y.dtype, np.floating) else np.array_equal(x, y))
            if not same:
                raise WebExportError(f"{env.name}'s exported {name} disagrees with JAX on "
                                     f"output {output.name}: the runtime computes it otherwise")
        return want

    if "table" in graphs:  # random endings, some of them in the table
        endings = jax.jit(jax.vmap(env.random_start))(
            jax.random.split(jax.random.PRNGKey(0), _CHECK_ENDINGS))
        for i in range(_CHECK_ENDINGS):
            compare("table", [np.asarray(x[i]) for x in jax.tree.leaves(endings)])
    for game in range(_CHECK_GAMES):
        leaves = [np.asarray(x) for x in jax.tree.leaves(env.init(jax.random.PRNGKey(game)))]
        for _ in range(_CHECK_PLIES):
            if "table" in graphs:
                compare("table", leaves)
            _, obs, legal, *_ = compare("describe", leaves)
            compare("network", [obs[None]])
            if bool(compare("describe", leaves)[4]):
                break
            if "steps" in graphs:
                actions = np.resize(np.flatnonzero(legal), steps_batch(env)).astype(np.int32)
                children_obs = compare("steps", [*leaves, actions])[len(leaves)]
                compare("network", [children_obs])
            action = np.int32(rng.choice(np.flatnonzero(legal)))
            compare("tree_step", [*leaves, action])
            leaves = compare("step", [*leaves, action])[:len(leaves)]


def _game_json(agent: Agent, strengths: tuple[int, ...]) -> dict[str, Any]:
    env, search = agent.env, agent.config.search
    alphabeta = search.algorithm == "alphabeta"
    searcher = alphabeta_searcher(search)
    initial = env.init(jax.random.PRNGKey(0))
    view = env.board_view(initial)
    frame = view.to_json()
    del frame["cells"]
    return {
        "id": env.name,
        "title": env.title,
        "players": list(env.player_names),
        "num_actions": env.num_actions,
        "max_game_length": env.max_game_length,
        "labels": [env.action_to_str(a) for a in range(env.num_actions)],
        "clicks": [[list(cells) for cells in env.action_clicks(a)]
                   for a in range(env.num_actions)],
        "move_chain": _move_chain(env),
        "board": {"frame": frame, "cells": [c.__dict__ for c in env.board_cells()]},
        "state": [{"name": f"s{i}", "dtype": str(np.asarray(x).dtype),
                   "shape": list(np.shape(x)), "initial": np.asarray(x).reshape(-1).tolist()}
                  for i, x in enumerate(jax.tree.leaves(initial))],
        "observation_shape": list(env.observation_shape),
        "model": model_label(agent),
        "untrained": bool(agent.meta.get("untrained")),
        "search": {
            # An alpha-beta model's simulation counts are its network's Gumbel search's.
            "algorithm": "gumbel" if alphabeta else search.algorithm,
            "num_simulations": agent.num_simulations,
            "strengths": list(strengths),
            "movetimes": list(MOVETIMES),
            "max_num_considered_actions": search.max_num_considered_actions,
            "qtransform": search.qtransform,
            "pb_c_init": search.pb_c_init,
            "pb_c_base": search.pb_c_base,
            "greedy_action": search.greedy_action,
            "endgame_table": search.endgame_table,
            "alphabeta": None if not alphabeta else {
                "depth": searcher.depth, "quiescence": searcher.quiescence,
                "nodes": search.alphabeta_nodes, "leaf_scale": LEAF_SCALE},
        },
    }


def _move_chain(env: Env) -> str:
    """How the page writes a turn of several actions: the game's `move_chain` ("x" for
    draughts: `9x18`, `18x27` -> `9x18x27`), else "" (the actions' notations, spaced)."""
    return str(getattr(env, "move_chain", ""))


def export_web(agent: Agent, out: str | Path, *, ort_dir: str | Path | None = None,
               strengths: tuple[int, ...] = SIMULATIONS) -> Path:
    """Writes the browser page of `agent` to `out` (see the module docstring).

    Args:
      agent: the model to export (its game, network, search settings and simulations).
      out: the folder to write; an earlier export there is replaced, any other non-empty
        folder is refused.
      ort_dir: where onnxruntime-web's files are (`find_onnxruntime_web`).
      strengths: the simulation counts the page offers, beside the model's own.

    Returns:
      `out`.

    Raises:
      WebExportError: a game or search setting that cannot be exported, a graph that
        disagrees with JAX, a target folder that is not an earlier export, no
        onnxruntime-web; one line naming which and why.
    """
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not (out / "game" / "game.json").is_file():
        raise WebExportError(f"{out} is not empty and holds no earlier web export: give a new "
                             "or empty folder")
    ort_folder = find_onnxruntime_web(ort_dir)
    _check_supported(agent)
    functions = _game_functions(agent)
    graphs = {}
    for name, spec in functions.items():
        try:
            graphs[name] = _to_onnx(name, agent.env, *spec).SerializeToString()
        except WebExportError:
            if name != "steps":  # steps.onnx only speeds alpha-beta up: the page can do
                raise  # without it (a scatter at a batched index does not convert, say)
    _check_graphs(agent, graphs, functions)
    game = _game_json(agent, tuple(sorted({*strengths, agent.num_simulations})))
    game["steps_batch"] = steps_batch(agent.env) if "steps" in graphs else 1

    with tempfile.TemporaryDirectory(dir=out.parent if out.parent.exists() else None) as tmp:
        staging = Path(tmp) / "web"
        (staging / "static" / "ort").mkdir(parents=True)
        (staging / "game").mkdir()
        for name in PAGE_FILES:
            target = staging / ("index.html" if name == "index.html" else f"static/{name}")
            shutil.copyfile(STATIC_DIR / name, target)
        page = (staging / "index.html").read_text()
        (staging / "index.html").write_text(page.replace(
            '<meta name="azjax-backend" content="server">',
            '<meta name="azjax-backend" content="web">'))
        for name in ORT_FILES:
            shutil.copyfile(ort_folder / name, staging / "static" / "ort" / name)
        (staging / "static" / "ort" / "NOTICE.txt").write_text(_ort_notice(ort_folder))
        for name, data in graphs.items():
            (staging / "game" / f"{name}.onnx").write_bytes(data)
        (staging / "game" / "game.json").write_text(json.dumps(game, indent=1))
        if out.exists():
            shutil.rmtree(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), out)
    return out


def _ort_notice(ort_folder: Path) -> str:
    """Which runtime the page carries and under which licence, read off its package."""
    package = ort_folder.parent / "package.json"
    meta = json.loads(package.read_text()) if package.is_file() else {}
    return (f"static/ort/ holds files of {meta.get('name', 'onnxruntime-web')} "
            f"{meta.get('version', ORT_VERSION)} (https://github.com/microsoft/onnxruntime),\n"
            f"copyright Microsoft Corporation, licensed under the {meta.get('license', 'MIT')} "
            "licence: https://github.com/microsoft/onnxruntime/blob/main/LICENSE\n")
