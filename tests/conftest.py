import pytest


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch):
    """Tests of the tool never read the developer's environment overrides."""
    for var in ("MIANJING_ROOT", "MIANJING_CATALOG", "MIANJING_DB", "MIANJING_DEVICE"):
        monkeypatch.delenv(var, raising=False)
