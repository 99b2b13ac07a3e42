"""LaTeX maths as readable terminal text: ``$\\min(r,1+\\epsilon)\\cdot A$`` -> ``min(r,1+ε)·A``.

The site renders maths with MathML; a terminal gets Unicode: Greek letters and operators as their
symbols, simple sub/superscripts as Unicode sub/superscript characters when every character has
one (``x^2`` -> ``x²``, ``N_d`` -> ``N_d`` stays readable), ``\\frac{a}{b}`` -> ``(a)/(b)``,
``\\sqrt{x}`` -> ``√(x)``, font commands (``\\mathrm``, ``\\text``...) dropped, ``$`` removed.
Stdlib only and fast: it runs on the quiz's start-up path.
"""

from __future__ import annotations

import re
import unicodedata

SYMBOLS = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε", "zeta": "ζ",
    "eta": "η", "theta": "θ", "vartheta": "θ", "kappa": "κ", "lambda": "λ", "mu": "μ", "nu": "ν", "xi": "ξ",
    "pi": "π", "rho": "ρ", "sigma": "σ", "tau": "τ", "phi": "φ", "varphi": "φ", "chi": "χ", "psi": "ψ",
    "omega": "ω", "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ", "Lambda": "Λ", "Xi": "Ξ", "Pi": "Π", "Sigma": "Σ",
    "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω", "nabla": "∇", "partial": "∂", "infty": "∞",
    "cdot": "·", "times": "×", "div": "÷", "pm": "±", "mp": "∓", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥",
    "ne": "≠", "neq": "≠", "approx": "≈", "sim": "~", "propto": "∝", "equiv": "≡", "to": "→", "rightarrow": "→",
    "leftarrow": "←", "Rightarrow": "⇒", "implies": "⇒", "iff": "⇔", "mapsto": "↦", "in": "∈", "notin": "∉",
    "subset": "⊂", "subseteq": "⊆", "cup": "∪", "cap": "∩", "forall": "∀", "exists": "∃", "sum": "Σ",
    "prod": "Π", "int": "∫", "log": "log", "ln": "ln", "exp": "exp", "min": "min", "max": "max", "arg": "arg",
    "sin": "sin", "cos": "cos", "tanh": "tanh", "mathbb": "", "E": "E", "ldots": "…", "cdots": "⋯", "dots": "…",
    "quad": " ", "qquad": "  ", "lVert": "‖", "rVert": "‖", "Vert": "‖", "|": "‖", "langle": "⟨", "rangle": "⟩",
    "lfloor": "⌊", "rfloor": "⌋", "lceil": "⌈", "rceil": "⌉", "star": "⋆", "circ": "∘", "top": "ᵀ",
    "parallel": "‖", "mid": "|", "neg": "¬", "land": "∧", "lor": "∨", "ell": "ℓ",
}
DROP = {"mathrm", "text", "textrm", "mathbf", "mathit", "mathcal", "operatorname", "boldsymbol", "bm", "left",
        "right", "big", "Big", "bigg", "Bigg", "bigl", "bigr", "Bigl", "Bigr", "biggl", "biggr", "displaystyle", "limits", "nolimits", "mathsf", "textbf", "hat",
        "bar", "tilde", "overline", "widehat", "vec", "dot"}
ACCENT = {"hat": "\u0302", "bar": "\u0304", "tilde": "\u0303", "vec": "\u20d7", "dot": "\u0307", "overline": "\u0305",
          "widehat": "\u0302"}
SUP = dict(zip("0123456789+-=()niT", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱᵀ"))
SUB = dict(zip("0123456789+-=()aehijklmnoprstuvx", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ"))

_MATH = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$", re.S)


def _group(s: str, i: int) -> tuple[str, int]:
    """The argument at ``s[i]``: a {braced group} or one character. Returns (text, next index)."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i >= len(s):
        return "", i
    if s[i] == "{":
        depth, j = 0, i
        while j < len(s):
            if s[j] == "{":
                depth += 1
            elif s[j] == "}":
                depth -= 1
                if depth == 0:
                    return s[i + 1:j], j + 1
            j += 1
        return s[i + 1:], len(s)
    if s[i] == "\\":
        m = re.match(r"\\([A-Za-z]+|.)", s[i:])
        return m.group(0), i + len(m.group(0))
    return s[i], i + 1


def _script(body: str, table: dict, mark: str) -> str:
    text = tex(body)
    if text and all(c in table for c in text):
        return "".join(table[c] for c in text)
    return f"{mark}{text}" if len(text) == 1 else f"{mark}({text})"


def tex(s: str) -> str:
    """One LaTeX maths expression (without the dollars) as text."""
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\":
            m = re.match(r"\\([A-Za-z]+|.)", s[i:])
            name = m.group(1)
            i += len(m.group(0))
            if name == "frac" or name in ("dfrac", "tfrac"):
                a, i = _group(s, i)
                b, i = _group(s, i)
                a, b = tex(a), tex(b)
                wrap = (lambda x: x if re.fullmatch(r"[\w.]+", x) else f"({x})")
                out.append(f"{wrap(a)}/{wrap(b)}")
            elif name == "sqrt":
                a, i = _group(s, i)
                out.append(f"√({tex(a)})")
            elif name in ACCENT:
                a, i = _group(s, i)
                inner = tex(a)
                out.append(inner + ACCENT[name] if len(inner) == 1 else inner)
            elif name in DROP:
                if i < len(s) and s[i] == "{":
                    a, i = _group(s, i)
                    out.append(tex(a))
            elif name in SYMBOLS:
                out.append(SYMBOLS[name])
            elif name in (",", ";", "!", " ", ":"):
                out.append(" " if name != "!" else "")
            elif name in ("{", "}", "_", "%", "&", "#", "$"):
                out.append(name)
            elif name == "\\":
                out.append("; ")
            else:
                out.append(name)
        elif c in "^_":
            body, i = _group(s, i + 1)
            out.append(_script(body, SUP if c == "^" else SUB, c))
        elif c in "{}":
            i += 1
        elif c == "~":
            out.append(" ")
            i += 1
        else:
            out.append(c)
            i += 1
    return re.sub(r"[ \t]{2,}", " ", "".join(out)).strip()


def render(text: str) -> str:
    """Markdown text with ``$...$`` / ``$$...$$`` maths -> the same text with the maths as Unicode."""
    if "$" not in text and "\\" not in text:
        return text
    return unicodedata.normalize("NFC", _MATH.sub(lambda m: tex(m.group(1) or m.group(2)), text))
