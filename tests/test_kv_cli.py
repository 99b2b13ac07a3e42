"""``mianjing kv``: the table's numbers equal the cache a decoder of the same config really allocates,
for every preset; bad arguments give one line and exit status 2."""

from __future__ import annotations

import re

import pytest
import torch
from rich.console import Console
from typer.testing import CliRunner

from impls.inference.kv_cache import PRESETS
from impls.inference.tiny_decoder import TinyDecoder
from mianjing.cli import app
from mianjing.calculators.kv_cli import run

runner = CliRunner()


def _render(**kw) -> str:
    console = Console(record=True, width=200, color_system=None)
    run(console=console, **kw)
    return console.export_text()


def _rows(out: str) -> dict[str, list[str]]:
    rows = {}
    for line in out.splitlines():
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) == 6 and re.fullmatch(r"[\d,]+", cells[3]):
            rows[cells[0]] = cells[1:]
    return rows


def _measured(name: str, seq: int, batch: int, dtype: str) -> int:
    model = TinyDecoder(PRESETS[name], seed=None, device="meta")
    cache = model.new_cache(batch, seq, dtype)
    model(torch.zeros(batch, seq, dtype=torch.long, device="meta"), cache, 0)
    return cache.nbytes()


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_configured_row_equals_the_measured_cache(name):
    seq, batch, dtype = 1000, 3, ("fp8" if "deepseek" in name else "bf16")
    rows = _rows(_render(model=name, seq=seq, batch=batch, dtype=dtype))
    configured = next(v for k, v in rows.items() if "(configured)" in k)
    total = int(configured[2].replace(",", ""))
    assert total == _measured(name, seq, batch, dtype)
    assert int(configured[1].replace(",", "")) * seq * batch == total


def test_llama3_8b_8k_batch16_and_its_mha_mqa_rows():
    rows = _rows(_render(model="llama-3-8b", seq=8192, batch=16, dtype="bf16"))
    assert rows["GQA-8 (configured)"][2] == "17,179,869,184" and rows["GQA-8 (configured)"][4] == "16.000"
    assert rows["MHA, 32 KV heads: 4×"][2] == "68,719,476,736"
    assert rows["MQA, 1 KV head: 0.125×"][2] == "2,147,483,648"
    assert int(rows["GQA-8 (configured)"][2].replace(",", "")) == _measured("llama-3-8b", 8192, 16, "bf16")
    fp8 = _rows(_render(model="llama-3-8b", seq=8192, batch=16, dtype="fp8"))
    assert fp8["GQA-8 (configured)"][2] == "8,589,934,592"


def test_model_names_are_case_insensitive():
    assert _rows(_render(model="Llama-3-8B", seq="8192", batch="1"))["GQA-8 (configured)"][2] == "1,073,741,824"


@pytest.mark.parametrize("args, says", [
    (["--model", "llama-9b", "--seq", "8"], "--model: unknown model 'llama-9b'"),
    (["--model", "llama-3-8b", "--seq", "0"], "--seq must be a positive integer, got '0'"),
    (["--model", "llama-3-8b", "--seq", "-5"], "--seq must be a positive integer"),
    (["--model", "llama-3-8b", "--seq", "nan"], "--seq must be a positive integer, got 'nan'"),
    (["--model", "llama-3-8b", "--seq", "8.5"], "--seq must be a positive integer"),
    (["--model", "llama-3-8b", "--seq", "8", "--batch", "0"], "--batch must be a positive integer"),
    (["--model", "llama-3-8b", "--seq", "8", "--batch", "inf"], "--batch must be a positive integer"),
    (["--model", "llama-3-8b", "--seq", "8", "--dtype", "int4"], "--dtype must be one of"),
])
def test_bad_input_is_one_line_and_exit_2(args, says):
    res = runner.invoke(app, ["kv", *args])
    assert res.exit_code == 2
    out = res.output.strip()
    assert len(out.splitlines()) == 1 and says in out and "Traceback" not in out


def test_cli_prints_the_table(monkeypatch):
    # the CLI's console is built when mianjing.cli is imported, at whatever width the terminal had then
    monkeypatch.setattr("mianjing.cli.console", Console(width=200, color_system=None))
    res = runner.invoke(app, ["kv", "--model", "qwen2.5-7b", "--seq", "32768"])
    assert res.exit_code == 0, res.output
    assert "1,879,048,192" in res.output and "GQA-4 (configured)" in res.output
