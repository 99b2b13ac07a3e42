"""The static site: entry pages generated from the KnowledgeBase at build time (mkdocs-material).

``build(root)`` runs mkdocs on ``root/mkdocs.yml``; the hook in ``hooks.py``
generates every entry, index and report page in memory (nothing is written to
``docs/``) and builds the English half into ``<site>/en/`` after the Chinese one.
``make_server`` serves a built site the way a static host does: compressed when the
browser accepts it, and the language's ``404.html`` (status 404) for a missing page.
"""

from __future__ import annotations

import functools
import gzip
import http.server
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

STATS: dict = {}  # timings of the last build (filled by hooks.py)
SHARED: dict = {}  # what the Chinese build hands to the English one it starts (same process)


class SiteError(RuntimeError):
    pass


@dataclass
class BuildResult:
    site_dir: Path
    seconds: float
    stats: dict = field(default_factory=dict)

    def summary(self) -> str:
        """One line: where the time went."""
        s = self.stats
        bits = []
        if "pages_zh" in s:
            bits.append(f"zh pages {s['pages_zh']:.1f} s")
        if "pages_en" in s:
            bits.append(f"en pages {s['pages_en']:.1f} s")
        if s.get("figures_total"):
            drawn = s.get("figures_drawn", 0)
            bits.append(f"figures: {drawn} of {s['figures_total']} drawn"
                        + (f" in {s.get('figures_seconds', 0):.1f} s by {s.get('figures_workers', 1)} processes alongside"
                           " the pages" if drawn else " (all cached)")
                        + (f", waited {s['figures_wait']:.1f} s" if s.get("figures_wait", 0) >= 0.05 else ""))
        return "; ".join(bits)


def build(root: Path, *, strict: bool = False, site_dir: Path | None = None) -> BuildResult:
    """Build the whole site (both languages) from ``root/mkdocs.yml``."""
    import logging

    # Material prints its end-of-life notice (Zensical named as successor; see CONTRIBUTING.md) when the
    # theme loads under the `mkdocs` command; this variable keeps it out of every build we run.
    os.environ.setdefault("NO_MKDOCS_2_WARNING", "1")

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
    return BuildResult(Path(cfg.site_dir), time.perf_counter() - t0, dict(STATS))


_COMPRESSIBLE = (".html", ".css", ".js", ".json", ".svg", ".xml", ".txt", ".map")


class Handler(http.server.SimpleHTTPRequestHandler):
    """Static files as a host serves them: gzip for text, a real 404 page, quiet logs."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".js": "text/javascript", ".svg": "image/svg+xml", ".gz": "application/gzip"}
    _gz: dict = {}

    def log_message(self, fmt, *args):  # keep the console for the URL
        pass

    def send_head(self):
        path = self.translate_path(self.path)
        if os.path.isdir(path):
            if not self.path.split("?", 1)[0].endswith("/"):
                return super().send_head()  # the redirect to the slash
            path = os.path.join(path, "index.html")
        if not os.path.isfile(path):
            return self._not_found()
        if path.endswith(_COMPRESSIBLE) and "gzip" in self.headers.get("Accept-Encoding", ""):
            return self._send_file(path, gzipped=True)
        return super().send_head()

    def _send_file(self, path: str, gzipped: bool, status: int = 200):
        import io

        st = os.stat(path)
        key = (path, st.st_mtime_ns, st.st_size)
        body = self._gz.get(key)
        if body is None:
            with open(path, "rb") as f:
                body = gzip.compress(f.read(), compresslevel=6, mtime=0)
            self._gz[key] = body
        self.send_response(status)
        self.send_header("Content-Type", self.guess_type(path))
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Vary", "Accept-Encoding")
        self.end_headers()
        return io.BytesIO(body)

    def _not_found(self):
        import io

        root = Path(self.directory)
        url = self.path.split("?", 1)[0]
        page = root / "en" / "404.html" if url.startswith("/en/") and (root / "en" / "404.html").is_file() else root / "404.html"
        if not page.is_file():
            self.send_error(404, "File not found")
            return None
        if "gzip" in self.headers.get("Accept-Encoding", ""):
            return self._send_file(str(page), gzipped=True, status=404)
        body = page.read_bytes()
        self.send_response(404)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        import sys

        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return  # the browser went elsewhere before the page arrived: nothing to report
        super().handle_error(request, client_address)


def make_server(site_dir: Path, host: str = "127.0.0.1", port: int = 0) -> http.server.ThreadingHTTPServer:
    """An HTTP server for a built site (``port=0``: a free port)."""
    handler = functools.partial(Handler, directory=str(site_dir))
    return Server((host, port), handler)


def serve_in_thread(site_dir: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    srv = make_server(site_dir)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    host, port = srv.server_address[:2]
    return srv, f"http://{host}:{port}/"
