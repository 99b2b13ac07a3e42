"""``mianjing site build|serve`` (registered on the main app in ``mianjing/cli.py``).

Only the standard library and typer at import time: mkdocs is imported when a command runs.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

site_app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                       help="The static site: build it, or verify-if-needed, build and serve it.")


def _root() -> Path:
    from ..paths import RootNotFound, repo_root

    try:
        return repo_root()
    except RootNotFound as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def _logging(strict: bool) -> None:
    import logging

    class _Stderr(logging.StreamHandler):
        """Writes to whatever sys.stderr is when a record arrives (tests swap it)."""

        @property
        def stream(self):
            return sys.stderr

        @stream.setter
        def stream(self, value):
            pass

    logger = logging.getLogger("mkdocs")
    if not any(getattr(h, "_mianjing", False) for h in logger.handlers):
        h = _Stderr()
        h.setFormatter(logging.Formatter("%(levelname)-7s -  %(message)s"))
        h._mianjing = True  # type: ignore[attr-defined]
        logger.addHandler(h)
        logger.propagate = False


def _build(root: Path, strict: bool, site_dir: Path | None) -> Path:
    from . import SiteError, build

    _logging(strict)
    try:
        res = build(root, strict=strict, site_dir=site_dir)
    except SiteError as exc:
        typer.echo(f"error: site build failed: {exc}", err=True)
        raise typer.Exit(1) from None
    shown = res.site_dir.relative_to(root) if res.site_dir.is_relative_to(root) else res.site_dir
    detail = res.summary()
    typer.echo(f"built {shown}/ (zh) and {shown}/en/ in {res.seconds:.1f} s" + (f" ({detail})" if detail else ""))
    return res.site_dir


@site_app.command("build")
def build_cmd(
    strict: Annotated[bool, typer.Option("--strict", help="fail on any warning (broken link, bad formula, ...)")] = False,
    site_dir: Annotated[Optional[Path], typer.Option(help="where to write the site (default build/site)")] = None,
) -> None:
    """Build the site (Chinese at the root, English under en/) from qa/ and build/verification.json."""
    _build(_root(), strict, site_dir)


def report_state(root: Path) -> str:
    """fresh | missing | stale | unreadable: whether build/verification.json matches the code on disk."""
    from ..paths import report_path
    from ..report import ReportError, inputs_digest, load_report

    try:
        rep = load_report(report_path(root))
    except ReportError:
        return "unreadable"
    if rep is None:
        return "missing"
    return "fresh" if rep.data.get("inputs_digest") == inputs_digest(root) else "stale"


@site_app.command("serve")
def serve_cmd(
    addr: Annotated[str, typer.Option(help="host:port to listen on")] = "127.0.0.1:8000",
    no_verify: Annotated[bool, typer.Option("--no-verify", help="do not run the verifiers, even if the report is stale")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="fail on any build warning")] = False,
) -> None:
    """Run `mianjing verify` if the report is missing or stale, build the site, serve it on ADDR."""
    from . import make_server

    host, _, port_s = addr.rpartition(":")
    if not host or not port_s.isdigit():
        typer.echo(f"error: --addr must be host:port, not {addr!r}", err=True)
        raise typer.Exit(2)
    root = _root()
    if not no_verify:
        state = report_state(root)
        if state != "fresh":
            typer.echo(f"verification report is {state}: running mianjing verify first")
            rc = subprocess.call([sys.executable, "-m", "mianjing.cli", "verify"], cwd=root)
            if rc != 0:
                typer.echo(f"mianjing verify exited with {rc}: the site shows what failed", err=True)
    site = _build(root, strict, None)
    try:
        srv = make_server(site, host, int(port_s))
    except OSError as exc:
        typer.echo(f"error: cannot listen on {addr}: {exc.strerror}", err=True)
        raise typer.Exit(1) from None
    typer.echo(f"serving {site} on http://{host}:{srv.server_address[1]}/  (English: /en/; Ctrl-C stops)")
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()
