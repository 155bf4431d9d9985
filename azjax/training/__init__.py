"""The host side of `azjax train`: the loop, run checkpoints, metrics, export, report, ladder.

This is where files, clocks, signals and progress bars live. May import every layer below it:
`envs`, `azjax.config`, `azjax.core`, the model layer and `azjax.evaluation`.
"""
