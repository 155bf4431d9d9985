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


_LATE_KEPT = "_late_fields_in_pytree"  # set on instances unflattened with their late fields


def struct_with_late_fields(*late: str) -> Callable[[type], type]:
    """A frozen dataclass pytree, like `flax.struct.dataclass` (every field a child, keyed by
    its name; a `replace` method), whose `late` fields are left out of the pytree while all of
    them are None: fields added after runs were checkpointed, so a run without them keeps the
    exact pytree, and checkpoint layout, it had before they existed.

    An instance rebuilt from a pytree with the late fields keeps them in its pytree even when
    every leaf is None: a `tree.map` to None (as orbax does for its save arguments) then keeps
    the structure it mapped."""

    def wrap(cls: type) -> type:
        cls = dataclasses.dataclass(frozen=True)(cls)
        names = tuple(f.name for f in dataclasses.fields(cls))
        unknown = set(late) - set(names)
        if unknown:
            raise TypeError(f"{cls.__name__} has no fields {sorted(unknown)}")

        def present(x) -> tuple[str, ...]:
            if not getattr(x, _LATE_KEPT, False) and all(getattr(x, n) is None for n in late):
                return tuple(n for n in names if n not in late)
            return names

        def flatten_with_keys(x):
            kept = present(x)
            return [(jax.tree_util.GetAttrKey(n), getattr(x, n)) for n in kept], kept

        def flatten(x):
            kept = present(x)
            return [getattr(x, n) for n in kept], kept

        def unflatten(kept, children):
            made = cls(**dict(zip(kept, children, strict=True)))
            if len(kept) == len(names):  # the late fields were in the pytree: keep them there
                object.__setattr__(made, _LATE_KEPT, True)
            return made

        jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)
        cls.replace = lambda self, **updates: dataclasses.replace(self, **updates)
        return cls

    return wrap


@struct_with_late_fields("state", "outcome", "reply_policy", "short_value")
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
    # float32 [..., A], the search policy of the next position of the same game (the
    # reply-policy head's target); all zeros where there is none (the game ended here, or a
    # fast search of playout-cap randomisation left none); None without that head
    reply_policy: jax.Array | None = None
    # float32 [...], the short-horizon value for the player to move (`short_value_targets`),
    # under `value_mask`; None without the short-value head
    short_value: jax.Array | None = None

    def training_view(self) -> Positions:
        """These positions as an update step trains on them: without the env states and
        outcomes that only reanalysis and branching starts read."""
        return self.replace(state=None, outcome=None)
