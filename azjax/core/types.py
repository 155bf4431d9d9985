"""Pytrees shared across modules, and the shape legend used in every docstring.

Shape legend: B batch (games or samples), T time (steps in a chunk), A actions,
N simulations, C replay capacity, S symmetries; `*obs` is the game's observation shape.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax

__all__ = ["Positions", "struct_with_late_fields"]


def struct_with_late_fields(*late: str) -> Callable[[type], type]:
    """A frozen dataclass pytree, like `flax.struct.dataclass` (every field a child, keyed by
    its name; a `replace` method), whose `late` fields are left out of the pytree while all of
    them are None: fields added after runs were checkpointed, so a run without them keeps the
    exact pytree, and checkpoint layout, it had before they existed.

    Orbax maps every leaf to None (its save arguments) and expects the same structure back, so
    the late fields must not all be bare arrays: one of them should be a pytree node (an env
    State), whose mapped copy is not None itself."""

    def wrap(cls: type) -> type:
        cls = dataclasses.dataclass(frozen=True)(cls)
        names = tuple(f.name for f in dataclasses.fields(cls))
        unknown = set(late) - set(names)
        if unknown:
            raise TypeError(f"{cls.__name__} has no fields {sorted(unknown)}")

        def present(x) -> tuple[str, ...]:
            if all(getattr(x, n) is None for n in late):
                return tuple(n for n in names if n not in late)
            return names

        def flatten_with_keys(x):
            kept = present(x)
            return [(jax.tree_util.GetAttrKey(n), getattr(x, n)) for n in kept], kept

        def flatten(x):
            kept = present(x)
            return [getattr(x, n) for n in kept], kept

        def unflatten(kept, children):
            return cls(**dict(zip(kept, children, strict=True)))

        jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)
        cls.replace = lambda self, **updates: dataclasses.replace(self, **updates)
        return cls

    return wrap


@struct_with_late_fields("state", "outcome")
class Positions:
    """Training positions, any leading shape (e.g. [T, B] from self-play, [C] in the buffer)."""

    observation: jax.Array  # float32 [..., *obs], from the view of the player to move
    policy: jax.Array  # float32 [..., A], search policy target
    value: jax.Array  # float32 [...], final result for the player to move, in [-1, 1]
    value_mask: jax.Array  # bool [...], False where the value target is unknown or excluded
    # float32 [...], the game's final material difference for the player to move
    # (`Env.material`), under `value_mask`; None when the run has no material head
    material: jax.Array | None = None
    # env State [...] of the position before its move (the tree env self-play walks), for
    # reanalysis and branching starts; None when neither is on
    state: Any = None
    # float32 [...], the game's outcome z for the player to move (`value` mixes z with the
    # search value), under `value_mask`; None exactly when `state` is
    outcome: jax.Array | None = None
