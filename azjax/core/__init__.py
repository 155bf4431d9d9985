"""The compiled, pure pipeline: network, search, self-play, targets, replay, losses, steps, layout.

Everything here is a pure function of arrays and PRNG keys (or builds one), jit- and
vmap-able, with no files, clocks or threads. It may import `envs` and `azjax.config` only.
"""
