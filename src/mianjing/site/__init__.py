"""The static site: entry pages generated from the KnowledgeBase at build time (mkdocs-material).

``build(root)`` runs mkdocs on ``root/mkdocs.yml``; the hook in ``hooks.py``
generates every entry, index and report page in memory (nothing is written to
``docs/``) and builds the English half into ``<site>/en/`` after the Chinese one.
"""

from __future__ import annotations

import functools
import http.server
import threading
import time
from dataclasses import dataclass
from pathlib import Path


class SiteError(RuntimeError):
    pass


@dataclass
class BuildResult:
    site_dir: Path
    seconds: float


def build(root: Path, *, strict: bool = False, site_dir: Path | None = None) -> BuildResult:
    """Build the whole site (both languages) from ``root/mkdocs.yml``."""
    import logging

    from mkdocs.commands.build import build as mk_build
    from mkdocs.config import load_config
    from mkdocs.exceptions import Abort, ConfigurationError

    cfg_file = root / "mkdocs.yml"
    if not cfg_file.is_file():
        raise SiteError(f"{cfg_file}: no mkdocs.yml in this checkout")
    kw = {"strict": strict}
    if site_dir is not None:
        kw["site_dir"] = str(site_dir)
    t0 = time.perf_counter()
    logging.getLogger("mkdocs").setLevel(logging.WARNING)  # warnings only (strict counts them)
    try:
        cfg = load_config(str(cfg_file), **kw)
        cfg.plugins.on_startup(command="build", dirty=False)
        try:
            mk_build(cfg)
        finally:
            cfg.plugins.on_shutdown()
    except (Abort, ConfigurationError) as exc:
        raise SiteError(str(exc)) from None
    return BuildResult(Path(cfg.site_dir), time.perf_counter() - t0)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, fmt, *args):  # noqa: D401 - keep the console for the URL
        pass


def make_server(site_dir: Path, host: str = "127.0.0.1", port: int = 0) -> http.server.ThreadingHTTPServer:
    """An HTTP server for a built site (``port=0``: a free port)."""
    handler = functools.partial(_Quiet, directory=str(site_dir))
    return http.server.ThreadingHTTPServer((host, port), handler)


def serve_in_thread(site_dir: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    srv = make_server(site_dir)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    host, port = srv.server_address[:2]
    return srv, f"http://{host}:{port}/"
