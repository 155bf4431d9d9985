"""Measuring agents: arenas, baseline opponents, perfect-play oracles, the in-training evaluator.

May import `envs`, `azjax.config`, `azjax.core` and the model layer (`azjax.model_files`,
`azjax.agent`).
"""
