"""Read YAML safely while remembering the line of every key and list item.

The file is composed into nodes (libyaml when available) and built into plain
Python by hand, so duplicate keys are refused and every location
``("claims", 2, "verdict")`` maps to the line it came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

Loc = tuple[str | int, ...]


class YamlError(ValueError):
    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line = line
        self.message = message


@dataclass
class YamlDocument:
    data: object
    lines: dict[Loc, int] = field(default_factory=dict)

    def line_of(self, loc: Loc) -> int:
        """The line of the deepest known prefix of ``loc`` (1-based)."""
        loc = tuple(loc)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get((), 1)


class _ScalarBuilder(yaml.SafeLoader):
    def __init__(self) -> None:  # no stream: only the constructor is used
        yaml.constructor.SafeConstructor.__init__(self)


_scalars = _ScalarBuilder()


def _build(node: yaml.Node, loc: Loc, lines: dict[Loc, int]) -> object:
    if isinstance(node, yaml.MappingNode):
        out: dict = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise YamlError(key_node.start_mark.line + 1, "a mapping key must be a plain scalar")
            key = _scalars.construct_object(key_node)
            if key == "<<":
                raise YamlError(key_node.start_mark.line + 1, "merge keys (<<) are not allowed")
            if key in out:
                first = lines.get(loc + (key,), "?")
                raise YamlError(key_node.start_mark.line + 1, f"duplicate key {key!r} (first on line {first})")
            lines[loc + (key,)] = key_node.start_mark.line + 1
            out[key] = _build(value_node, loc + (key,), lines)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            lines[loc + (i,)] = item.start_mark.line + 1
            items.append(_build(item, loc + (i,), lines))
        return items
    return _scalars.construct_object(node)


def _refuse_anchors(text: str) -> None:
    """Anchors and aliases (``&a`` / ``*a``) are refused: nine lines of nested aliases expand to
    billions of nodes (an alias bomb), and an entry never needs them. Scans the parser's events."""
    if "&" not in text and "*" not in text:
        return
    for ev in yaml.parse(text, Loader=_Loader):
        if isinstance(ev, yaml.AliasEvent) or getattr(ev, "anchor", None):
            raise YamlError(ev.start_mark.line + 1, "anchors and aliases (&name, *name) are not allowed; "
                                                     "write the value out")


def read_yaml(path: Path) -> YamlDocument:
    """Parse one YAML document; raise :class:`YamlError` with a line on any problem."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        column = exc.start - raw.rfind(b"\n", 0, exc.start)
        raise YamlError(line, f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at column {column} "
                              f"({exc.reason})") from None
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        _refuse_anchors(text)
        root = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        what = " ".join(x for x in (exc.context, exc.problem) if x)
        text_lines = text.splitlines()
        if 0 < line <= len(text_lines) and "\t" in text_lines[line - 1]:
            what += " (a tab character: YAML indentation must use spaces)"
        raise YamlError(line, what) from None
    except yaml.YAMLError as exc:
        raise YamlError(1, " ".join(str(exc).split())) from None
    if root is None:
        raise YamlError(1, "the file is empty")
    lines: dict[Loc, int] = {(): root.start_mark.line + 1}
    try:
        data = _build(root, (), lines)
    except yaml.constructor.ConstructorError as exc:
        mark = exc.problem_mark
        raise YamlError(mark.line + 1 if mark else 1, " ".join(str(exc.problem).split())) from None
    return YamlDocument(data=data, lines=lines)
