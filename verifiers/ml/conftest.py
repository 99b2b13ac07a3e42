"""The ml verifiers run many tiny tensor ops: one intra-op thread each (see verifiers/one_thread.py)."""

from verifiers.one_thread import one_thread  # noqa: F401
