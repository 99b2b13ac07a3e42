"""The ``mianjing`` console script.

Three commands take a fast path: ``quiz``, ``kata list`` and ``kata judge`` with plain options are
read here and run without building the typer application (typer, click and the option parsing of
every command cost more than the rest of ``quiz``'s start-up). Anything else -- another command,
``--help``, an option or value this reader does not know -- goes to the typer app in ``cli.py``,
which gives the usual help and error messages. Ctrl-C at any point of start-up ends with one line,
never a traceback.
"""

from __future__ import annotations

import sys

# option -> (keyword, kind); kind: str | int1-3 | pos-int | float | path | flag:<value>
_QUIZ = {"--topic": ("topic", "str"), "--company": ("company", "str"), "--difficulty": ("difficulty", "int1-3"),
         "--lang": ("lang", "str"), "-n": ("n", "pos-int"), "--db": ("db", "path")}
_LIST = {"--track": ("track", "str"), "--lang": ("lang", "str")}
_JUDGE = {"--kata": ("name", "str"), "--timeout": ("timeout", "float"), "--memory-mb": ("memory_mb", "int"),
          "--record": ("record", "flag:1"), "--no-record": ("record", "flag:0"), "--lang": ("lang", "str"),
          "--db": ("db", "path")}


def parse(args: list[str], spec: dict, defaults: dict, positional: str | None = None) -> dict | None:
    """Options as keyword arguments, or None when typer should handle them (help, errors)."""
    out = dict(defaults)
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if positional and not arg.startswith("-") and positional not in out:
            from pathlib import Path

            out[positional] = Path(arg)
            continue
        name, eq, value = arg.partition("=")
        if name not in spec:
            return None
        key, kind = spec[name]
        if kind.startswith("flag:"):
            if eq:
                return None
            out[key] = kind == "flag:1"
            continue
        if not eq:
            if i >= len(args):
                return None
            value = args[i]
            i += 1
        if kind in ("int1-3", "pos-int", "int"):
            try:
                number = int(value)
            except ValueError:
                return None
            if (kind == "int1-3" and not 1 <= number <= 3) or (kind == "pos-int" and number < 1):
                return None
            out[key] = number
        elif kind == "float":
            try:
                out[key] = float(value)
            except ValueError:
                return None
        elif kind == "path":
            from pathlib import Path

            out[key] = Path(value)
        else:
            out[key] = value
    if positional and positional not in out:
        return None
    return out


def _root():
    from .paths import RootNotFound, repo_root

    try:
        return repo_root()
    except RootNotFound as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def fast(argv: list[str]) -> bool:
    """Run ``argv`` on the fast path if it is one; False to hand it to typer."""
    if argv[:1] == ["quiz"]:
        opts = parse(argv[1:], _QUIZ, {"topic": None, "company": None, "difficulty": None, "lang": None, "n": 10,
                                        "db": None})
        if opts is None:
            return False
        from .quiz.commands import quiz

        quiz(_root(), **opts)
        return True
    if argv[:2] == ["kata", "list"]:
        opts = parse(argv[2:], _LIST, {"track": None, "lang": None})
        if opts is None:
            return False
        from .quiz.commands import kata_list

        kata_list(_root(), **opts)
        return True
    if argv[:2] == ["kata", "judge"]:
        opts = parse(argv[2:], _JUDGE, {"name": None, "timeout": 30.0, "memory_mb": 4096, "record": True,
                                        "lang": None, "db": None}, positional="file")
        if opts is None:
            return False
        from .quiz.commands import kata_judge

        file = opts.pop("file")
        kata_judge(_root(), file, **opts)
        return True
    return False


def _ctrl_c_from_now_on() -> None:
    """scripts/mianjing starts Python with Ctrl-C ignored; from here on it raises KeyboardInterrupt,
    which main() turns into one line."""
    import os

    if os.environ.pop("MIANJING_SIGINT_IGNORED", None):
        import signal

        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        _ctrl_c_from_now_on()
        if fast(argv):
            return 0
        from .cli import app

        return app(args=argv, prog_name="mianjing")
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.argv[0] = "mianjing"
    sys.exit(main())
