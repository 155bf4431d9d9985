"""azjax: AlphaZero in JAX.

The names a notebook or script imports, each from the layer it lives in (docs/architecture.md
draws the layers). They load on first use, so `import azjax` stays light:

    import azjax
    agent = azjax.Agent.load("connect_four")           # a shipped model, or a run / model dir
    config = azjax.load_config("experiments/tic_tac_toe.yaml")
    result = azjax.train(config, "runs/tic_tac_toe")   # what `azjax train` runs
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# Public name -> the module that defines it.
_PUBLIC = {
    # The ground: configuration.
    "ConfigError": "azjax.config",
    "ExperimentConfig": "azjax.config",
    "load_config": "azjax.config",
    # The compiled pipeline.
    "make_network": "azjax.core.network",
    "init_network": "azjax.core.network",
    "SearchOutput": "azjax.core.search",
    "make_search": "azjax.core.search",
    "make_network_search": "azjax.core.search",
    "make_selfplay": "azjax.core.selfplay",
    "init_selfplay": "azjax.core.selfplay",
    "make_steps": "azjax.core.steps",
    "Steps": "azjax.core.steps",
    "RunState": "azjax.core.steps",
    "TrainState": "azjax.core.steps",
    "Layout": "azjax.core.layout",
    "jit_steps": "azjax.core.steps",
    # The model layer.
    "Agent": "azjax.agent",
    "load_model": "azjax.model_files",
    "save_model": "azjax.model_files",
    # Measuring and training.
    "Trainer": "azjax.training.trainer",
    "run_arena": "azjax.evaluation.arena",
    "ArenaResult": "azjax.evaluation.arena",
    "train": "azjax.training.loop",
    "RunResult": "azjax.training.loop",
}

__all__ = ["__version__", *sorted(_PUBLIC)]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'azjax' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
