"""Figures get every glyph from the fonts the project installs, on a machine with no fonts of its own.

A fresh machine has no CJK font (often no font at all). The drawing process is run with
``/usr/share/fonts`` and the font caches hidden (bubblewrap mounts empty folders over them) and an
empty matplotlib config folder; the test then reads the SVGs it wrote: text is drawn as paths, and
every character of every label must be there as the glyph of the font that has it -- DejaVu Sans
(matplotlib's own) or the bundled Noto Sans SC -- never matplotlib's last-resort box.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mianjing.site import figures as F

ROOT = Path(__file__).resolve().parents[1]
HIDDEN = ("/usr/share/fonts", "/usr/local/share/fonts", "/var/cache/fontconfig")
REAL = ["figures/rl.py::ppo_clip_objective", "figures/inference.py::paged_kv_utilisation",
        "figures/parallel.py::pipeline_timeline"]
# Characters a label may well use beyond today's: full-width punctuation, arrows and relations, Greek,
# units and the most common hanzi (the first 300 of GB 2312 level 1, the commonest 3,755).
PROBE = ("，。：；（）【】、“”‘’！？《》—…·＋－×÷≤≥≈≠±∞→←↑↓αβγδεθλμπσστφω%‰℃ "
         + bytes(b for hi in (0xB0, 0xB1, 0xB2) for lo in range(0xA1, 0xFF) for b in (hi, lo)).decode("gb2312"))


def _cmap(path: Path) -> tuple[str, dict[int, int]]:
    """A font's PostScript name and code point -> glyph index."""
    from fontTools.ttLib import TTFont

    font = TTFont(str(path), lazy=True)
    names = font["name"]
    ps = str(names.getDebugName(6))
    return ps, {cp: font.getGlyphID(g) for cp, g in font.getBestCmap().items()}


def test_the_bundled_font_has_every_chinese_character_of_the_figures_and_the_base():
    """Every CJK character written in figures/*.py (labels) and qa/ (the text new labels will come from)."""
    path = F.cjk_font_file()
    assert path is not None, f"{F.CJK_FONT[0]} is not installed: it is a dependency of the site extra"
    _, cmap = _cmap(path)
    used: dict[str, str] = {}
    for folder, pattern in (("figures", "*.py"), ("qa", "*.yaml")):
        for f in sorted((ROOT / folder).rglob(pattern)):
            for ch in f.read_text(encoding="utf-8"):
                if F._has_cjk(ch) or "\u3000" <= ch <= "\u303f" or "\uff00" <= ch <= "\uffef":
                    used.setdefault(ch, f.relative_to(ROOT).as_posix())
    assert len(used) > 500  # the check reads real text
    missing = {ch: where for ch, where in used.items() if ord(ch) not in cmap}
    assert not missing, f"characters Noto Sans SC lacks: {missing}"
    gb2312 = bytes(b for hi in range(0xB0, 0xF8) for lo in range(0xA1, 0xFF) for b in (hi, lo)).decode("gb2312", "ignore")
    assert all(ord(ch) in cmap for ch in gb2312)


_SANDBOXED = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import matplotlib
    from matplotlib import font_manager
    from matplotlib.text import Text
    root, probe_dir, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    sys.path[:0] = [str(root), str(probe_dir)]
    own = Path(matplotlib.get_data_path()).resolve()
    seen = sorted({f.fname for f in font_manager.fontManager.ttflist if not Path(f.fname).resolve().is_relative_to(own)})
    from mianjing.site import figures as F
    import importlib
    rows = []
    for ref in json.loads(sys.argv[4]):
        base = probe_dir if ref.startswith("probe_figures/") else root
        path, fn = ref.split("::")
        fig = getattr(importlib.import_module(path[:-3].replace("/", ".")), fn)("zh")
        labels = [t.get_text() for t in fig.findobj(Text) if t.get_visible() and t.get_text()]
        svg, problems = F.draw(base, ref, "zh")
        name = ref.replace("/", "_").replace("::", ".") + ".svg"
        (out / name).write_bytes(svg or b"")
        rows.append({"ref": ref, "labels": labels, "problems": problems, "svg": name})
    print(json.dumps({"system_fonts": seen, "figures": rows}, ensure_ascii=False))
""")


def _sandbox() -> list[str]:
    """A command prefix that runs its command with empty folders mounted over the font folders: bubblewrap,
    or util-linux's unshare (on every Debian) where bubblewrap is missing."""
    hidden = [d for d in HIDDEN if Path(d).is_dir()]
    tried = []
    if shutil.which("bwrap"):
        cmd = ["bwrap", "--dev-bind", "/", "/", *[a for d in hidden for a in ("--tmpfs", d)]]
        probe = subprocess.run([*cmd, "true"], capture_output=True, text=True)
        if probe.returncode == 0:
            return cmd
        tried.append(f"bwrap: {probe.stderr.strip()[:120]}")
    if shutil.which("unshare"):
        mounts = "".join(f"mount -t tmpfs tmpfs {d} || exit 97; " for d in hidden)
        cmd = ["unshare", "-rm", "sh", "-c", mounts + 'exec "$@"', "hide-fonts"]
        probe = subprocess.run([*cmd, "true"], capture_output=True, text=True)
        if probe.returncode == 0:
            return cmd
        tried.append(f"unshare: {probe.stderr.strip()[:120]}")
    pytest.skip("cannot hide the system fonts: no mount namespace here ("
                + ("; ".join(tried) or "apt-get install bubblewrap") + ")")


def _glyph_ids(svg: bytes) -> set[str]:
    return set(re.findall(r'<path id="([^"]+)" d="[^"]+"', svg.decode()))


def test_figures_drawn_with_no_system_font_carry_every_label_glyph(tmp_path):
    cmd = _sandbox()
    probe_dir = tmp_path / "probe"
    (probe_dir / "probe_figures").mkdir(parents=True)
    (probe_dir / "probe_figures" / "__init__.py").write_text("")
    lines = [PROBE[i:i + 24] for i in range(0, len(PROBE), 24)]  # 24 glyphs of 12 pt: legible on a phone at 5 in
    (probe_dir / "probe_figures" / "probe.py").write_text(textwrap.dedent(f"""
        from matplotlib.figure import Figure

        def coverage(lang):
            lines = {lines!r}
            fig = Figure(figsize=(5, 0.25 * len(lines) + 0.2))
            for i, line in enumerate(lines):
                fig.text(0.02, 1 - (i + 1) / (len(lines) + 1), line, fontsize=12)
            return fig
    """), encoding="utf-8")
    out = tmp_path / "svg"
    out.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MPL", "XDG_"))}
    env.update(MPLCONFIGDIR=str(tmp_path / "mplconfig"), XDG_CACHE_HOME=str(tmp_path / "cache"),
               HOME=str(tmp_path / "home"), MPLBACKEND="Agg")
    refs = [*REAL, "probe_figures/probe.py::coverage"]
    res = subprocess.run([*cmd, sys.executable, "-c", _SANDBOXED, str(ROOT), str(probe_dir), str(out), json.dumps(refs)],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert report["system_fonts"] == [], "the sandbox still shows system fonts"
    import matplotlib

    dejavu_ps, dejavu = _cmap(Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf")
    noto_ps, noto = _cmap(F.cjk_font_file())
    assert len(report["figures"]) == len(refs)
    for row in report["figures"]:
        assert row["problems"] == [], row
        svg = (out / row["svg"]).read_bytes()
        ids = _glyph_ids(svg)
        fonts = {i.rsplit("-", 1)[0] for i in ids if re.search(r"-[0-9a-f]+$", i)}
        assert not [f for f in fonts if "LastResort" in f], f"{row['ref']}: a glyph drawn as matplotlib's last-resort box"
        assert all(f.startswith(("DejaVu", "STIX", "cm", noto_ps)) for f in fonts), f"{row['ref']}: fonts {fonts}"
        chinese = 0
        for label in row["labels"]:
            plain = re.sub(r"\$[^$]*\$", "", label)  # maths is set by mathtext's own fonts
            for ch in set(plain) - set(" \n\t"):
                if ord(ch) in dejavu:
                    want = f"{dejavu_ps}-{dejavu[ord(ch)]:x}"
                else:
                    assert ord(ch) in noto, f"{row['ref']}: {ch!r} is in neither bundled font"
                    want = f"{noto_ps}-{noto[ord(ch)]:x}"
                    chinese += 1
                assert want in ids, f"{row['ref']}: label {label!r}: no path for {ch!r} ({want})"
        assert chinese > 0, f"{row['ref']}: no Chinese glyph checked"
