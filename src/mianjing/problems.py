"""One problem report format: ``path:line: field: message``."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Problem:
    path: str  # relative to the repository root
    line: int  # 1-based; 0 when the whole file is meant
    field: str  # dotted location, e.g. claims[2].correction
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.field}: {self.message}"


def one_line(text: str) -> str:
    """Collapse a multi-line library message into one line."""
    return " ".join(str(text).split())
