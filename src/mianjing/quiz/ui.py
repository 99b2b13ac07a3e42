"""Terminal input for the quiz and the mock: multi-line answers, ratings, clocks."""

from __future__ import annotations

import os
import threading
import time

from rich.console import Console

from .scheduler import RATINGS

RATING_WORDS = {"1": 1, "2": 2, "3": 3, "4": 4, "a": 1, "again": 1, "h": 2, "hard": 2, "g": 3, "good": 3,
                "e": 4, "easy": 4}
LABELS = {
    "zh": {1: "Again 忘了", 2: "Hard 困难", 3: "Good 良好", 4: "Easy 简单"},
    "en": {1: "Again", 2: "Hard", 3: "Good", 4: "Easy"},
}

T = {
    "answer_prompt": {"zh": "你的回答（空行或 Ctrl-D 结束）：", "en": "Your answer (finish with an empty line or Ctrl-D):"},
    "short": {"zh": "简要答案", "en": "Short answer"},
    "key_points": {"zh": "要点", "en": "Key points"},
    "covered": {"zh": "已覆盖", "en": "covered"},
    "missed": {"zh": "遗漏", "en": "missed"},
    "follow_up": {"zh": "追问", "en": "Follow-up"},
    "ticks": {"zh": "回车 = 确认这些勾选；输入编号切换勾选（如 2 3），a 全选，n 全不选",
              "en": "Enter keeps these ticks; type numbers to toggle them (e.g. 2 3), a = all, n = none"},
    "ticked": {"zh": "你的勾选：{c}/{n} 个要点", "en": "your ticks: {c}/{n} key points"},
    "contradicted": {"zh": "说反了", "en": "contradicted"},
    "keyword_only": {"zh": "看起来只是罗列关键词：没有说清它们之间的关系，建议最多 Hard",
                     "en": "this looks like a list of keywords without saying how they relate: suggestion at most Hard"},
    "rate": {"zh": "自评 1 Again / 2 Hard / 3 Good / 4 Easy；回车 = 建议值 {s}；q 退出",
             "en": "Rate 1 Again / 2 Hard / 3 Good / 4 Easy; Enter = suggested {s}; q quits"},
    "saved": {"zh": "已保存：下次复习 {due}", "en": "saved: next review {due}"},
    "due": {"zh": "到期复习", "en": "due review"},
    "new": {"zh": "新题", "en": "new"},
    "difficulty": {"zh": "难度", "en": "difficulty"},
    "nothing": {"zh": "没有符合条件的题目（没有到期复习，也没有新题）。",
                "en": "Nothing to ask: no due reviews and no new questions match."},
    "done": {"zh": "本轮结束：已评分 {n} 题。", "en": "Session over: {n} question(s) rated."},
    "interrupted": {"zh": "已中断：已评分的 {n} 题都已保存。", "en": "Interrupted: the {n} rated question(s) are saved."},
    "asked_at": {"zh": "出现于", "en": "asked at"},
    "mock_interrupted": {"zh": "已中断：已回答的题目都已保存（报告未生成）。",
                         "en": "Interrupted: every answered question is saved (no report written)."},
}


def t(key: str, lang: str, **kw) -> str:
    s = T[key][lang]
    return s.format(**kw) if kw else s


class TitleClock:
    """While the candidate types, a ticking clock in the terminal's title bar (``mm:ss / budget``).

    Only on a real terminal (the title escape is invisible elsewhere); the input line is never
    touched, so typing (Chinese IME included) is undisturbed.
    """

    def __init__(self, budget: float | None, stream=None):
        import sys

        self.budget = budget
        self.stream = stream or sys.stdout
        self.enabled = budget is not None and self.stream.isatty() and os.environ.get("TERM", "dumb") != "dumb"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _title(self, text: str) -> None:
        try:
            self.stream.write(f"\x1b]0;{text}\x07")
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def _run(self) -> None:
        start = time.monotonic()
        while not self._stop.wait(1.0):
            used = time.monotonic() - start
            flag = " !" if used > self.budget else ""
            self._title(f"mianjing mock ⏱ {clock(used)} / {clock(self.budget)}{flag}")

    def __enter__(self) -> "TitleClock":
        if self.enabled:
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join(2)
            self._title("mianjing")


def _line_editing() -> None:
    """On a terminal, GNU readline makes input() edit wide (Chinese) characters correctly."""
    import sys

    if sys.stdin.isatty():
        try:
            import readline  # noqa: F401
        except ImportError:
            pass


def ask_line(prompt: str) -> str:
    """``input(prompt)``, with Ctrl-C acted on within a twentieth of a second whenever it comes.

    CPython's readline ``input()`` notices a signal only when its ``select()`` on the terminal is
    interrupted. A Ctrl-C whose handler runs anywhere else inside the call -- while the prompt is
    written and the terminal set up, or while a keystroke is handled; the window a loaded machine
    widens, since the candidate types as soon as the prompt text shows -- only sets Python's flag,
    and ``select()`` then sleeps until the next key: the terminal threw the typed-ahead keys away
    with the ^C, so nothing happens at all. So the line is read in a helper thread and the main
    thread (the one Python runs signal handlers in) waits with a short timeout, acting on a pending
    signal every time it wakes. On KeyboardInterrupt the terminal settings readline changed are put
    back; every caller ends the program then (the helper stays blocked in ``select()`` until exit).
    EOFError (Ctrl-D) and the line come back as from ``input()``.
    """
    import sys

    if threading.current_thread() is not threading.main_thread():
        return input(prompt)
    saved = None
    try:
        import termios

        if sys.stdin.isatty():
            saved = termios.tcgetattr(sys.stdin.fileno())
    except (ImportError, OSError, ValueError):
        pass
    box: dict = {}
    done = threading.Event()

    def read() -> None:
        try:
            box["line"] = input(prompt)
        except BaseException as exc:  # noqa: BLE001 -- handed to the main thread
            box["error"] = exc
        finally:
            done.set()

    try:  # start() too: the helper may reach readline, and the Ctrl-C land, before start() returns
        threading.Thread(target=read, name="mianjing-input", daemon=True).start()
        while not done.wait(0.05):
            pass
    except KeyboardInterrupt:
        if saved is not None:
            try:
                termios.tcsetattr(sys.stdin.fileno(), termios.TCSANOW, saved)
            except (OSError, ValueError):
                pass
        raise
    if "error" in box:
        raise box["error"]
    return box["line"]


def read_answer(console: Console, lang: str, budget: float | None = None, on_prompt=None) -> str:
    """Lines until an empty line or EOF (Ctrl-D). Ctrl-C propagates (KeyboardInterrupt).

    With a ``budget`` (seconds; the mock interview) a clock ticks in the terminal title meanwhile.
    """
    _line_editing()
    console.print(t("answer_prompt", lang), markup=False, style="bold")
    if on_prompt is not None:
        on_prompt()
    lines: list[str] = []
    with TitleClock(budget):
        while True:
            try:
                line = ask_line("> ")
            except EOFError:
                console.print()
                break
            if not line.strip():
                break
            lines.append(line)
    return "\n".join(lines)


def read_ticks(console: Console, lang: str, ticks: list[bool]) -> list[bool] | None:
    """The candidate confirms or overrides each key point. Returns the ticks (None: quit with Ctrl-D/q)."""
    ticks = list(ticks)
    while True:
        console.print(t("ticks", lang), markup=False, style="cyan")
        try:
            raw = ask_line("points> ").strip().casefold()
        except EOFError:
            return None
        if raw == "":
            return ticks
        if raw in ("q", "quit", "exit"):
            return None
        if raw in ("a", "all"):
            ticks = [True] * len(ticks)
        elif raw in ("n", "none"):
            ticks = [False] * len(ticks)
        else:
            nums = raw.replace(",", " ").replace("，", " ").split()
            if not nums or not all(x.isdigit() and 1 <= int(x) <= len(ticks) for x in nums):
                console.print(f"? 1..{len(ticks)} / a / n / Enter", markup=False, style="yellow")
                continue
            for x in nums:
                ticks[int(x) - 1] = not ticks[int(x) - 1]
        console.print("  " + "  ".join(f"{i}{'✓' if v else '✗'}" for i, v in enumerate(ticks, 1)) + "   "
                      + t("ticked", lang, c=sum(ticks), n=len(ticks)), markup=False)


def read_rating(console: Console, lang: str, suggested: int) -> int | None:
    """1..4, or None when the candidate quits (q, or Ctrl-D)."""
    prompt = t("rate", lang, s=f"{suggested} {LABELS['en'][suggested]}")
    while True:
        console.print(prompt, markup=False, style="bold cyan")
        try:
            raw = ask_line("rating> ").strip().casefold()
        except EOFError:
            return None
        if raw == "":
            return suggested
        if raw in ("q", "quit", "exit"):
            return None
        if raw in RATING_WORDS:
            return RATING_WORDS[raw]
        console.print("? 1 2 3 4 / again hard good easy / q", markup=False, style="yellow")


def clock(seconds: float) -> str:
    s = max(0, int(round(seconds)))
    return f"{s // 60:02d}:{s % 60:02d}"


__all__ = ["RATINGS", "ask_line", "read_answer", "read_rating", "read_ticks", "clock", "t", "LABELS"]
