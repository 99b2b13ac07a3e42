"""Minimal stand-in for ``ray`` so that ``verl`` can be imported on one CPU machine.

verl's package imports ray at load time (``verl/protocol.py``) but ``verl.trainer.ppo.core_algos``
never calls it. Any attribute resolves to an inert placeholder; calling ray for real raises.
"""

from __future__ import annotations


class _Placeholder:
    def __init__(self, *args, **kwargs):
        pass

    def __call__(self, *args, **kwargs):
        # used as a decorator (@ray.remote) it returns the decorated object unchanged
        if len(args) == 1 and not kwargs and callable(args[0]):
            return args[0]
        raise RuntimeError("ray is stubbed out for the oracle tests; nothing may call it")

    def __getattr__(self, name):
        return _Placeholder()

    def __mro_entries__(self, bases):
        return (object,)


class ObjectRef:  # used in isinstance checks and type hints
    pass


class ActorHandle:
    pass


def is_initialized() -> bool:
    return False


def __getattr__(name):
    return _Placeholder()
