"""Each test on one thread: see verifiers/one_thread.py."""

from verifiers.one_thread import one_thread  # noqa: F401 -- an autouse fixture, active in this folder
