"""A verifier's evidence as a reader wants it: figures in a table, series as small plots, no JSON dump.

``render(evidence)`` turns the JSON a verifier recorded into HTML: scalars in a two-column
list, short lists inline, a list of four or more numbers (or a mapping from numbers to
numbers) as a small line plot, a list of records as a table plus one small plot per numeric
column when the records run along a numeric axis, and sibling record lists with the same
columns (``per_epoch_clipped`` / ``per_epoch_unclipped``) overlaid in the same plots.
``quoted(evidence)`` collects what ``evidence.quote`` recorded (the figure a claim quotes and
the figure the code measured) for the claim card.
"""

from __future__ import annotations

import html
import json
import math
from numbers import Real

MIN_SERIES = 4  # shorter lists of numbers are shown inline
MAX_DEPTH = 4
W, H = 240, 64  # plot size in CSS pixels (the SVG's own units)


def _is_num(v) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(float(v))


def _num_key(k: str) -> float | None:
    try:
        x = float(k)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def fmt(v) -> str:
    """A number the way a reader wants to see it: ints as they are, floats to 4 significant digits."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return f"{v:,}".replace(",", "\u2009") if abs(v) >= 100_000 else str(v)
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 1e6 or abs(v) < 1e-3:
            return f"{v:.3e}".replace("e-0", "e-").replace("e+0", "e+").replace("e+", "e")
        return f"{v:.4g}"
    return str(v)


def _esc(s) -> str:
    return html.escape(str(s), quote=True)


def _key(k) -> str:
    """A verifier's key as words: ``impl_vs_sympy_points`` -> ``impl vs sympy points``."""
    return _esc(str(k).replace("_", " "))


def _text(v: str) -> str:
    """A recorded string; a Python or sympy expression reads with ^ for powers (``x**2`` -> ``x^2``)."""
    return v.replace("**", "^")


# ----------------------------------------------------------------------------- quoted figures


def quoted(evidence) -> list[tuple[str, float, float, str]]:
    """Every ``evidence.quote`` record: (name, quoted, measured, precision), from one test or several."""
    out: list[tuple[str, float, float, str]] = []

    def take(d: dict) -> None:
        q = d.get("quoted")
        if isinstance(q, dict):
            for name, rec in q.items():
                if isinstance(rec, dict) and _is_num(rec.get("quoted")) and _is_num(rec.get("measured")):
                    out.append((str(name), float(rec["quoted"]), float(rec["measured"]), str(rec.get("precision", ""))))

    if isinstance(evidence, dict):
        take(evidence)
        for v in evidence.values():  # several tests: {test_function: evidence}
            if isinstance(v, dict):
                take(v)
    seen, unique = set(), []
    for row in out:
        if row[0] not in seen:
            seen.add(row[0])
            unique.append(row)
    return unique


# ----------------------------------------------------------------------------- plots


def _series_from(value) -> list[tuple[float, float]] | None:
    """(x, y) points if ``value`` is a series: >= MIN_SERIES numbers, or a mapping number -> number."""
    if isinstance(value, list) and len(value) >= MIN_SERIES and all(_is_num(v) for v in value):
        return [(float(i), float(v)) for i, v in enumerate(value)]
    if isinstance(value, dict) and len(value) >= MIN_SERIES - 1:
        xs = [_num_key(k) for k in value]
        if all(x is not None for x in xs) and all(_is_num(v) for v in value.values()):
            return [(x, float(v)) for x, v in zip(xs, value.values())]
    return None


def plot(title: str, series: list[tuple[str, list[tuple[float, float]]]], xlabel: str | None = None) -> str:
    """A small line plot (inline SVG, page colours) with its range written beside it."""
    pts = [p for _, s in series for p in s]
    xs, ys = [p[0] for p in pts], [p[1] for p in pts]
    x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
    if x1 == x0:
        x1 = x0 + 1
    pad = (y1 - y0) * 0.08 or (abs(y0) * 0.1 or 1.0)
    lo, hi = y0 - pad, y1 + pad

    def sx(x):
        return 2 + (x - x0) / (x1 - x0) * (W - 4)

    def sy(y):
        return H - 2 - (y - lo) / (hi - lo) * (H - 4)

    parts = [f'<svg class="mj-plot-svg" viewBox="0 0 {W} {H}" preserveAspectRatio="none" role="img" '
             f'aria-label="{_esc(title)}">']
    if lo < 0 < hi:
        parts.append(f'<line class="mj-plot-zero" x1="0" x2="{W}" y1="{sy(0):.1f}" y2="{sy(0):.1f}"/>')
    desc = []
    for i, (name, s) in enumerate(series):
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in s)
        parts.append(f'<polyline class="mj-s{i % 4}" points="{coords}"/>')
        if len(s) <= 24:
            dots = "".join(f"M{sx(x):.1f} {sy(y):.1f}h0" for x, y in s)
            parts.append(f'<path class="mj-s{i % 4} mj-dots" d="{dots}"/>')
        desc.append((f"{name}: " if name else "") + ", ".join(fmt(y) for _, y in s))
    parts.append(f"<title>{_esc('; '.join(desc))}</title></svg>")
    legend = ""
    if len(series) > 1 or series[0][0]:
        legend = '<span class="mj-plot-legend">' + " ".join(
            f'<span class="mj-k{i % 4}">{_esc(name)}</span>' for i, (name, _) in enumerate(series)) + "</span>"
    xl = _esc(xlabel) if xlabel else ""
    return (f'<div class="mj-plot"><div class="mj-plot-title">{_esc(title)} {legend}</div>'
            f'<div class="mj-plot-box"><span class="mj-plot-y"><span>{fmt(y1)}</span><span>{fmt(y0)}</span></span>'
            f'{"".join(parts)}</div>'
            f'<div class="mj-plot-x"><span>{_tick(x0)}</span><span>{xl}</span><span>{_tick(max(xs))}</span></div></div>')


def _tick(x: float) -> str:
    return fmt(int(x)) if float(x).is_integer() else fmt(x)


# ----------------------------------------------------------------------------- records


def _records(value) -> list[str] | None:
    """The common keys if ``value`` is a list of >= 2 flat dicts with the same keys."""
    if not (isinstance(value, list) and len(value) >= 2 and all(isinstance(r, dict) and r for r in value)):
        return None
    keys = list(value[0])
    if any(list(r) != keys for r in value):
        return None
    if any(isinstance(v, (dict, list)) for r in value for v in r.values()):
        return None
    return keys


def _axis(rows: list[dict], keys: list[str]) -> str | None:
    """The first column that is numeric and strictly increasing: the records run along it."""
    for k in keys:
        vals = [r[k] for r in rows]
        if all(_is_num(v) for v in vals) and all(b > a for a, b in zip(vals, vals[1:])):
            return k
    return None


def _table(rows: list[dict], keys: list[str]) -> str:
    head = "".join(f"<th>{_key(k)}</th>" for k in keys)
    # a number never breaks (the table scrolls instead): at 390 px "1.343e-6" wrapped after its "e-"
    body = "".join("<tr>" + "".join(f"<td>{_esc(_text(r[k]))}</td>" if isinstance(r[k], str)
                                    else f'<td class="mj-n">{_esc(fmt(r[k]))}</td>' for k in keys)
                   + "</tr>" for r in rows)
    return f'<div class="mj-scroll"><table class="mj-ev-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _record_plots(groups: list[tuple[str, list[dict]]], keys: list[str]) -> str:
    """One small plot per numeric column, one line per group, if the records run along an axis."""
    x = _axis(groups[0][1], keys)
    if x is None or len(groups[0][1]) < 3:
        return ""
    cols = [k for k in keys if k != x and all(_is_num(r[k]) for _, rows in groups for r in rows)]
    plots = []
    for k in cols:
        series = [(name, [(float(r[x]), float(r[k])) for r in rows]) for name, rows in groups]
        plots.append(plot(k.replace("_", " "), series, x.replace("_", " ")))
    return '<div class="mj-plots">' + "".join(plots) + "</div>" if plots else ""


# ----------------------------------------------------------------------------- the tree


def _inline(value) -> str | None:
    """A short value on one line, or None if it needs a block."""
    if isinstance(value, str):
        return _esc(_text(value))
    if value is None or isinstance(value, (bool, int, float)):
        return _esc(fmt(value))
    if isinstance(value, list) and len(value) < MIN_SERIES and all(
            v is None or isinstance(v, (bool, int, float, str)) for v in value):
        return "[" + ", ".join(_esc(fmt(v)) for v in value) + "]"
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return " · ".join(_esc(_text(v)) for v in value)
    if isinstance(value, list) and len(value) <= 6 and all(
            isinstance(v, list) and len(v) <= 8 and all(_is_num(x) for x in v) for v in value):
        return "[" + ", ".join("[" + ", ".join(fmt(x) for x in v) + "]" for v in value) + "]"
    return None


def _block(value, depth: int) -> str:
    """HTML for a mapping (or anything else at the top level)."""
    if not isinstance(value, dict):
        one = _inline(value)
        return f"<p>{one}</p>" if one is not None else _fallback(value)
    if depth > MAX_DEPTH:
        return _fallback(value)
    items = [(str(k), v) for k, v in value.items() if k != "quoted"]
    scalars, blocks = [], []
    done: set[str] = set()
    # sibling record lists with the same columns: one set of plots, one table each
    by_cols: dict[tuple, list[str]] = {}
    for k, v in items:
        cols = _records(v)
        if cols is not None:
            by_cols.setdefault(tuple(cols), []).append(k)
    for cols, names in by_cols.items():
        groups = [(n, value[n]) for n in names]
        plots = _record_plots(groups, list(cols))
        tables = "".join(f'<div class="mj-ev-key">{_key(n)}</div>{_table(rows, list(cols))}' for n, rows in groups)
        blocks.append((names[0], plots + tables))
        done.update(names)
    for k, v in items:
        if k in done:
            continue
        series = _series_from(v)
        if series is not None:
            blocks.append((k, plot(k.replace("_", " "), [("", series)])))
            continue
        one = _inline(v)
        if one is not None:
            scalars.append(f"<dt>{_key(k)}</dt><dd>{one}</dd>")
        elif isinstance(v, dict):
            blocks.append((k, f'<div class="mj-ev-key">{_key(k)}</div><div class="mj-ev-nest">{_block(v, depth + 1)}</div>'))
        else:
            blocks.append((k, f'<div class="mj-ev-key">{_key(k)}</div>{_fallback(v)}'))
    order = {k: i for i, (k, _) in enumerate(items)}
    blocks.sort(key=lambda kb: order.get(kb[0], 0))
    out = f'<dl class="mj-ev-dl">{"".join(scalars)}</dl>' if scalars else ""
    return out + "".join(b for _, b in blocks)


def _fallback(value) -> str:
    text = json.dumps(value, ensure_ascii=False, indent=1)
    return f'<pre class="mj-data"><code>{_esc(text)}</code></pre>'


def render(evidence) -> str:
    """Evidence (plain JSON from the report) as HTML."""
    return f'<div class="mj-ev">{_block(evidence, 0)}</div>'
