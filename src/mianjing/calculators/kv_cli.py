"""``mianjing kv``: the KV cache a model needs for a sequence length and batch.

Per token and layer a GQA model caches 2·n_kv_heads·head_dim elements and an MLA model d_c + d_h^R
(DeepSeek-V2 Table 1), so

    bytes = n_layers · elements_per_token_per_layer · seq · batch · bytes_per_element.

The configured attention is shown beside its MHA and MQA counterparts. torch is not imported; the numbers
come from ``impls.inference.kv_cache``, whose presets are transcribed from each model's config.json and
whose formula the tests check against the cache tensors a decoder of the same config allocates.
"""

from __future__ import annotations

import math

from rich import box
from rich.console import Console
from rich.table import Table


class KVInputError(ValueError):
    """A bad argument: reported as one line, exit status 2."""


def positive_int(flag: str, value) -> int:
    """``value`` as a positive integer ("8192", 8192, "8192.0"); anything else is a KVInputError."""
    text = str(value).strip()
    try:
        number = int(text)
    except ValueError:
        try:
            f = float(text)
        except ValueError:
            raise KVInputError(f"{flag} must be a positive integer, got {text!r}") from None
        if not math.isfinite(f) or not f.is_integer():
            raise KVInputError(f"{flag} must be a positive integer, got {text!r}") from None
        number = int(f)
    if number <= 0:
        raise KVInputError(f"{flag} must be a positive integer, got {text!r}")
    return number


def _impl():
    try:
        from impls.inference import kv_cache
    except ImportError:  # run from outside the repository root
        import sys
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        from impls.inference import kv_cache
    return kv_cache


def table_rows(model: str, seq, batch, dtype: str = "bf16") -> tuple[object, list[dict]]:
    """(config, one dict per attention variant) after validating every argument."""
    K = _impl()
    try:
        cfg = K.preset(model)
    except KeyError as exc:
        raise KVInputError(f"--model: {exc.args[0]}") from None
    seq_n, batch_n = positive_int("--seq", seq), positive_int("--batch", batch)
    if dtype not in K.DTYPE_BYTES:
        raise KVInputError(f"--dtype must be one of {', '.join(K.DTYPE_BYTES)}, got {dtype!r}")
    rows = []
    base = K.kv_cache_bytes(cfg, seq_n, batch_n, dtype)
    for label, variant in K.variants(cfg):
        total = K.kv_cache_bytes(variant, seq_n, batch_n, dtype)
        rows.append({"attention": label, "elements": K.elements_per_token_per_layer(variant),
                     "per_token": K.bytes_per_token(variant, dtype), "per_sequence": total // batch_n,
                     "total": total, "vs": total / base})
    return cfg, rows


def _shape(cfg) -> str:
    if cfg.attention == "mla":
        return f"MLA d_c={cfg.kv_lora_rank} + d_R={cfg.qk_rope_head_dim}"
    return f"{cfg.n_kv_heads} KV heads × {cfg.head_dim}"


def run(model: str, seq, batch=1, dtype: str = "bf16", console: Console | None = None) -> None:
    """Print the table; raises KVInputError for a bad argument."""
    cfg, rows = table_rows(model, seq, batch, dtype)
    seq_n, batch_n = positive_int("--seq", seq), positive_int("--batch", batch)
    console = console or Console()
    table = Table(
        box=box.SIMPLE_HEAD, padding=(0, 1),
        title=(f"KV cache of {cfg.name}: {cfg.n_layers} layers, {cfg.n_heads} query heads, {_shape(cfg)}, "
               f"{dtype}, seq {seq_n:,}, batch {batch_n:,}"),
        caption=("elements: cached per token per layer. bytes = layers · elements · seq · batch · bytes/element; "
                 f"GB = 1e9 bytes, GiB = 2^30. Config: {cfg.source}"),
    )
    for col in ("attention", "elements", "bytes/token", "total bytes", "GB", "GiB"):
        table.add_column(col, justify="left" if col == "attention" else "right", no_wrap=col != "attention",
                         overflow="fold")
    for r in rows:
        label = r["attention"] if r["vs"] == 1 else f"{r['attention']}: {r['vs']:.3g}×"
        table.add_row(label, f"{r['elements']:,}", f"{r['per_token']:,}", f"{r['total']:,}",
                      f"{r['total'] / 1e9:,.3f}", f"{r['total'] / 2**30:,.3f}")
    console.print(table)
