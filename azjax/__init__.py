"""azjax: AlphaZero in JAX.

Public API; see README.md for a tour and docs/ for the details of each part.
"""

__version__ = "0.1.0"

from azjax.agent import Agent  # noqa: E402
from azjax.config import (  # noqa: E402
    ConfigError,
    ExperimentConfig,
    load_config,
)
from azjax.core.learner import Learner, RunState, TrainState  # noqa: E402
from azjax.core.network import init_network, make_network  # noqa: E402
from azjax.core.search import SearchOutput, make_search  # noqa: E402
from azjax.core.selfplay import init_selfplay, make_selfplay  # noqa: E402

__all__ = [
    "Agent",
    "ConfigError",
    "ExperimentConfig",
    "Learner",
    "RunState",
    "SearchOutput",
    "TrainState",
    "__version__",
    "init_network",
    "load_config",
    "make_network",
    "make_search",
    "make_selfplay",
    "init_selfplay",
]
