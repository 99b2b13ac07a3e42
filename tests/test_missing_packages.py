"""A run whose tests skip for want of a system package ends by naming each package, what it skipped, and
the command that installs it (the plugin's terminal summary), also under pytest-xdist."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

TESTS = textwrap.dedent('''
    import pytest

    @pytest.mark.parametrize("i", range(3))
    def test_browser(i):
        pytest.skip("no Chromium at /nowhere/chromium (apt-get install chromium, or set MIANJING_CHROMIUM)")

    @pytest.mark.skipif(True, reason="bubblewrap is not installed (apt-get install bubblewrap; CI installs it)")
    def test_sandbox():
        pass

    def test_cuda():
        pytest.skip("needs CUDA")

    def test_runs():
        assert True
''')


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_the_run_ends_with_one_line_per_missing_package(tmp_path, xdist):
    (tmp_path / "test_needs.py").write_text(TESTS)
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "mianjing.plugin",
                          "--rootdir", str(tmp_path), "test_needs.py", *xdist], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("missing system package")]
    assert lines == [
        "missing system package bubblewrap: 1 test(s) skipped (test_needs.py); install it with: apt-get install bubblewrap",
        "missing system package chromium: 3 test(s) skipped (test_needs.py); install it with: apt-get install chromium",
    ]
    assert "1 passed, 5 skipped" in res.stdout
