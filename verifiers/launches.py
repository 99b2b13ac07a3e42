"""What a wrapper hands its Triton kernel, typed as the compiler types it.

``launch_types`` replaces ``module.<kernel>`` by a stand-in that records the arguments of every launch and
then launches the real kernel, and returns each launch's argument types by Triton's own signature
mangling (``triton.runtime.jit.mangle_type``): a Python float is ``"fp32"`` there, so a compiled kernel
receives it as an fp32 scalar whatever the wrapper computed it in (the interpreter passes it as a Python
double, which is why only this check, not a run on CPU, sees it).
"""

from __future__ import annotations


def launch_types(monkeypatch, module, kernel: str, call) -> list[list[str]]:
    from triton.runtime.jit import mangle_type

    real = getattr(module, kernel)
    seen: list[list[str]] = []

    class Recorder:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                seen.append([mangle_type(a) for a in args])
                return real[grid](*args, **kwargs)
            return launch

    monkeypatch.setattr(module, kernel, Recorder())
    call()
    monkeypatch.undo()
    assert seen, f"{kernel} was never launched"
    return seen
