"""Test instrument (loaded by the child's interpreter through PYTHONPATH): a Ctrl-C that lands
inside ``input()``, after the call began and before it waits for a key.

That is the moment a loaded machine widens: the candidate (or pexpect) types as soon as the prompt
text is on screen, while the quiz is still between printing it and blocking in readline's
``select()``. CPython's readline module acts on a signal only when that ``select()`` is interrupted
(EINTR); a SIGINT whose handler ran earlier just sets Python's flag, ``select()`` then sleeps until
the next keystroke, and the terminal has thrown the typed-ahead keys away with the ^C. So the
candidate sees nothing happen.

``MIANJING_TEST_SIGINT_IN_INPUT=N``: on the N-th ``input("> ")`` call, SIGINT is made pending on the
calling thread (blocked), and readline's pre-input hook -- run inside ``input()`` once the prompt is
shown, just before the wait -- unblocks it from C (ctypes, no Python bytecode runs afterwards, so
nothing but the real code path can act on it).
"""

import builtins
import ctypes
import functools
import os
import signal

_N = int(os.environ.get("MIANJING_TEST_SIGINT_IN_INPUT", "0") or 0)
_real_input = builtins.input
_calls = 0


def _unblock_sigint_from_c():
    libc = ctypes.CDLL(None, use_errno=True)
    sigset = ctypes.create_string_buffer(128)  # sigset_t is 1024 bits on Linux
    libc.sigemptyset(sigset)
    libc.sigaddset(sigset, int(signal.SIGINT))
    return functools.partial(libc.pthread_sigmask, int(signal.SIG_UNBLOCK), sigset, None)


def _input(prompt=""):
    global _calls
    if prompt != "> ":
        return _real_input(prompt)
    _calls += 1
    if _calls != _N:
        return _real_input(prompt)
    import readline
    import threading

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # pending, on this thread only
    readline.set_pre_input_hook(_unblock_sigint_from_c())
    try:
        return _real_input(prompt)
    finally:
        readline.set_pre_input_hook(None)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


if _N:
    builtins.input = _input
