"""The kata registry: which reference function a kata is, which properties judge it, its entry.

A kata is offered only when its reference file defines the symbol and its property module
exists (discovered from the files, parsed with ``ast``: listing katas imports no torch).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path



TRACKS = ("rl", "ml", "kernels", "leetcode")  # the interview rounds a kata rehearses, in `kata list` order
TRACK_NAMES = {"rl": ("RL", "强化学习"), "ml": ("ML", "机器学习手撕"), "kernels": ("kernels", "算子（Triton）"),
               "leetcode": ("LeetCode", "LeetCode 算法")}


@dataclass(frozen=True)
class Kata:
    name: str
    ref_path: str  # impls/rl/gae.py
    symbol: str  # gae
    props_path: str  # verifiers/katas/gae.py
    entry: str  # the entry a judged kata counts as a review of
    track: str  # one of TRACKS
    # a kernel kata: the @triton.jit functions the candidate writes (the stub gives their signatures and
    # docstrings); the judged symbol, the launch wrapper, is then given whole in the stub
    write: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.track not in TRACKS:
            raise ValueError(f"kata {self.name}: track must be one of {TRACKS}, got {self.track!r}")

    @property
    def ref_module(self) -> str:
        return self.ref_path[:-3].replace("/", ".")

    @property
    def props_module(self) -> str:
        return self.props_path[:-3].replace("/", ".")

    @property
    def impl_ref(self) -> str:
        return f"{self.ref_path}::{self.symbol}"

    def properties(self, root: Path) -> list[tuple[str, str]]:
        """``[(prop name, first docstring line)]`` in the module's ``ALL`` order, else source order."""
        tree = _parse(root / self.props_path)
        funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("prop_")}
        order = list(funcs)
        for node in tree.body:
            if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "ALL" for t in node.targets)
                    and isinstance(node.value, (ast.List, ast.Tuple))):
                named = [e.id for e in node.value.elts if isinstance(e, ast.Name) and e.id in funcs]
                if named:
                    order = named
        return [(n, " ".join((ast.get_docstring(funcs[n]) or "").split())) for n in order]

    def property_names(self, root: Path) -> list[str]:
        """The property names read with a regex, no parse (for listing): ``ALL``'s names, else every ``def prop_``."""
        import re

        text = (root / self.props_path).read_text(encoding="utf-8")
        defined = re.findall(r"^def (prop_\w+)\(", text, re.M)
        m = re.search(r"^ALL\s*=\s*[\[(]([^\])]*)[\])]", text, re.M)
        if m:
            named = [n for n in re.findall(r"\b(prop_\w+)\b", m.group(1)) if n in defined]
            if named:
                return named
        return defined

    def constant(self, root: Path, name: str):
        """A literal module constant of the property module (``RECURSION_LIMIT = 1000``...), or None."""
        tree = _parse(root / self.props_path)
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                try:
                    return ast.literal_eval(node.value)
                except ValueError:
                    return None
        return None

    def time_limits(self, root: Path) -> dict[str, float]:
        """``TIME_LIMITS = {"prop_...": seconds}`` in the property module: a property at scale may give the
        candidate's code less time than ``--timeout`` (a limit far above what a right answer needs, never a
        measurement)."""
        raw = self.constant(root, "TIME_LIMITS")
        if not isinstance(raw, dict):
            return {}
        return {k: float(v) for k, v in raw.items()
                if isinstance(k, str) and isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0}

    def zh(self, root: Path) -> dict[str, str]:
        """The property module's Chinese text, ``ZH = {...}`` (a literal, read without importing): ``"doc"`` (the
        conventions), one line per property, the symbol's docstring under its name and each method's under
        ``"Class.method"``. Empty when the module has none."""
        raw = self.constant(root, "ZH")
        if not isinstance(raw, dict):
            return {}
        return {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, str)}

    def zh_missing(self, root: Path) -> list[str]:
        """What the Chinese stub would lack: keys of ``ZH`` that are missing, empty or without a Chinese character."""
        zh = self.zh(root)
        # a kernel kata's launch wrapper is given whole: its kernels are what the candidate writes
        want = ["doc", *(n for n, _ in self.properties(root)), *(self.write or (self.symbol,))]
        node = _defines(root / self.ref_path, self.symbol)
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if (isinstance(item, ast.FunctionDef) and (item.name == "__init__" or not item.name.startswith("_"))
                        and ast.get_docstring(item)):
                    want.append(f"{self.symbol}.{item.name}")
        return [k for k in want if not _has_cjk(zh.get(k, ""))]

    def node_fields(self, root: Path) -> tuple[str, ...] | None:
        """``NODE_FIELDS = ("val", "left", "right")`` in the property module, if it sets one."""
        tree = _parse(root / self.props_path)
        for node in tree.body:
            if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "NODE_FIELDS"
                                                     for t in node.targets)
                    and isinstance(node.value, (ast.List, ast.Tuple))):
                names = [e.value for e in node.value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                if names:
                    return tuple(names)
        return None


REGISTRY: tuple[Kata, ...] = (
    Kata("gae", "impls/rl/gae.py", "gae", "verifiers/katas/gae.py", "ppo-loss-and-gae-lambda", track="rl"),
    Kata("ppo_clip_loss", "impls/rl/ppo.py", "ppo_clip_loss", "verifiers/katas/ppo_clip_loss.py",
         "ppo-clip-by-advantage-sign", track="rl"),
    Kata("grpo_advantages", "impls/rl/grpo.py", "grpo_advantages", "verifiers/katas/grpo_advantages.py",
         "grpo-loss-sequence-to-token", track="rl"),
    Kata("kl_estimate", "impls/rl/kl.py", "kl_estimate", "verifiers/katas/kl_estimate.py", "kl-estimators", track="rl"),
    Kata("dpo_loss", "impls/rl/dpo.py", "dpo_loss", "verifiers/katas/dpo_loss.py", "dpo-derivation", track="rl"),
    Kata("BSTIterator", "impls/coding/bst_iterator.py", "BSTIterator", "verifiers/katas/bst_iterator.py",
         "bst-iterator", track="leetcode"),
    Kata("online_logprobs", "impls/scale/fused_logprobs.py", "online_logprobs", "verifiers/katas/online_logprobs.py",
         "fused-logprob-entropy-kernel", track="ml"),
    Kata("fused_logprob_backward", "impls/scale/fused_logprobs.py", "fused_logprob_backward",
         "verifiers/katas/fused_logprob_backward.py", "fused-logprob-entropy-kernel", track="ml"),
    Kata("level_order_with_depth", "impls/coding/level_order.py", "level_order_with_depth",
         "verifiers/katas/level_order.py", "level-order-with-depth", track="leetcode"),
    Kata("length_of_lis", "impls/coding/lis.py", "length_of_lis", "verifiers/katas/lis.py", "longest-increasing-subsequence",
         track="leetcode"),
    Kata("LRUCache", "impls/coding/lru_cache.py", "LRUCache", "verifiers/katas/lru_cache.py", "lru-cache",
         track="leetcode"),
    Kata("trap", "impls/coding/trapping_rain_water.py", "trap", "verifiers/katas/trapping_rain_water.py",
         "trapping-rain-water", track="leetcode"),
    Kata("merge", "impls/coding/merge_intervals.py", "merge", "verifiers/katas/merge_intervals.py", "merge-intervals",
         track="leetcode"),
    Kata("merge_k_lists", "impls/coding/merge_k_lists.py", "merge_k_lists", "verifiers/katas/merge_k_lists.py",
         "merge-k-sorted-lists", track="leetcode"),
    Kata("num_islands", "impls/coding/number_of_islands.py", "num_islands", "verifiers/katas/number_of_islands.py",
         "number-of-islands", track="leetcode"),
    Kata("find_order", "impls/coding/topological_sort.py", "find_order", "verifiers/katas/topological_sort.py",
         "topological-sort", track="leetcode"),
    Kata("is_valid_bst", "impls/coding/validate_bst.py", "is_valid_bst", "verifiers/katas/validate_bst.py",
         "validate-bst", track="leetcode"),
    Kata("build_tree", "impls/coding/build_tree.py", "build_tree", "verifiers/katas/build_tree.py",
         "build-tree-from-preorder-inorder", track="leetcode"),
    # the ML coding round (issue 26)
    Kata("mha", "impls/ml/mha.py", "mha", "verifiers/katas/mha.py", "mha-from-scratch", track="ml"),
    Kata("cached_attention", "impls/ml/mha.py", "cached_attention", "verifiers/katas/kv_cache_decode.py",
         "kv-cache-decode", track="ml"),
    Kata("sampler", "impls/ml/decoding.py", "distribution", "verifiers/katas/sampler.py", "sampler-top-k-top-p",
         track="ml"),
    Kata("beam_search", "impls/ml/decoding.py", "beam_search_table", "verifiers/katas/beam_search.py",
         "beam-search-decoding", track="ml"),
    Kata("layer_norm", "impls/arch/norms.py", "layer_norm", "verifiers/katas/layer_norm.py", "layernorm-rmsnorm",
         track="ml"),
    Kata("rms_norm", "impls/arch/norms.py", "rms_norm", "verifiers/katas/rms_norm.py", "layernorm-rmsnorm",
         track="ml"),
    Kata("rope", "impls/arch/rope.py", "rope", "verifiers/katas/rope.py", "rope-apply", track="ml"),
    Kata("quantize_int8", "impls/numerics/quantization.py", "quantize_int8", "verifiers/katas/int8_quantize.py",
         "int8-quantize", track="ml"),
    Kata("BPETokenizer", "impls/ml/bpe.py", "BPETokenizer", "verifiers/katas/bpe.py", "bpe-tokenizer", track="ml"),
    Kata("gpt_forward", "impls/ml/gpt.py", "gpt_forward", "verifiers/katas/transformer_block.py",
         "transformer-block", track="ml"),
    # the kernel round (issue 25): the candidate writes the @triton.jit kernel, the launch wrapper is given
    Kata("triton-softmax", "impls/kernels/softmax.py", "softmax", "verifiers/katas/triton_softmax.py",
         "handwrite-softmax-kernel", track="kernels", write=("softmax_kernel",)),
    Kata("triton-matmul", "impls/kernels/matmul.py", "matmul", "verifiers/katas/triton_matmul.py",
         "handwrite-tiled-matmul", track="kernels", write=("matmul_kernel",)),
    Kata("triton-reduce", "impls/kernels/reduce.py", "reduce", "verifiers/katas/triton_reduce.py",
         "handwrite-reduce-kernel", track="kernels", write=("reduce_kernel",)),
    Kata("triton-transpose", "impls/kernels/transpose.py", "transpose", "verifiers/katas/triton_transpose.py",
         "handwrite-transpose-kernel", track="kernels", write=("transpose_kernel",)),
)


_PARSED: dict[str, tuple[tuple[int, int], ast.Module]] = {}


def _parse(path: Path) -> ast.Module:
    """``ast.parse`` of a file, kept while the file is unchanged (a listing reads each property module once)."""
    st = path.stat()
    stamp = (st.st_mtime_ns, st.st_size)
    hit = _PARSED.get(str(path))
    if hit is not None and hit[0] == stamp:
        return hit[1]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    _PARSED[str(path)] = (stamp, tree)
    return tree


def _has_cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def _defines(path: Path, symbol: str) -> ast.AST | None:
    try:
        tree = _parse(path)
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == symbol:
            return node
    return None


def _mentions(path: Path, symbol: str) -> bool:
    """A cheap test (no parse) that ``path`` has a top-level ``def``/``class`` of ``symbol``."""
    import re

    try:
        return re.search(rf"^(?:def|class)\s+{re.escape(symbol)}\b", path.read_text(encoding="utf-8"), re.M) is not None
    except (OSError, ValueError):
        return False


def available(root: Path) -> list[Kata]:
    out = []
    for k in REGISTRY:
        if (root / k.props_path).is_file() and _mentions(root / k.ref_path, k.symbol):
            try:
                if k.property_names(root):
                    out.append(k)
            except (OSError, ValueError):
                continue
    return out


def find(root: Path, name: str) -> Kata | None:
    for k in available(root):
        if k.name == name or k.name.casefold() == name.casefold():
            return k
    return None


def entry_for(kb, kata: Kata):
    """The entry this kata reviews (None when the knowledge base lacks it)."""
    return None if kb is None else kb.entries.get(kata.entry)


MARKER = "# mianjing-kata: "


def _segment(lines: list[str], start: int, end: int) -> list[str]:
    return lines[start - 1:end]


def _docstring(text: str, indent: str) -> list[str]:
    """``text`` as a docstring at ``indent`` (backslashes kept literal, triple quotes softened)."""
    body = text.strip().replace("\\", "\\\\").replace('"""', "'''").splitlines()
    if len(body) == 1:
        return [f'{indent}"""{body[0]}"""']
    return [f'{indent}"""{body[0]}'] + [indent + ln if ln.strip() else "" for ln in body[1:]] + [f'{indent}"""']


def _def_stub(lines: list[str], node: ast.FunctionDef, indent: str = "", doc: str | None = None,
              todo: str = "your code here") -> list[str]:
    """Signature (all its lines) + docstring (``doc`` in place of the reference's, when given) +
    ``raise NotImplementedError``; never the body."""
    first = node.body[0]
    has_doc = isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant) \
        and isinstance(first.value.value, str)
    start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
    out = _segment(lines, start, first.lineno - 1)
    body_indent = " " * first.col_offset
    if doc:
        out += _docstring(doc, body_indent)
    elif has_doc:
        out += _segment(lines, first.lineno, first.end_lineno)
    out.append(f"{body_indent}raise NotImplementedError  # {todo}")
    return out


_KEEP_IMPORT_PREFIXES = ("import torch", "from torch", "from typing", "from collections", "import math",
                         "import triton")

# The judge runs the candidate's file alone (impls/ is not there), so a tree kata's stub defines the
# node type it is given instead of importing ours.
_TREE_NODE = '''

class TreeNode:
    """What the judge passes in: a binary-tree node with the LeetCode fields."""

    def __init__(self, val=0, left=None, right=None):
        self.val = val
        self.left = left
        self.right = right'''

_LIST_NODE = '''

class ListNode:
    """What the judge passes in: a singly linked list node with the LeetCode fields."""

    def __init__(self, val=0, next=None):
        self.val = val
        self.next = next'''



LANGS = ("en", "zh")
_ZH_NODES = {"What the judge passes in: a binary-tree node with the LeetCode fields.":
             "评测传入的对象：带 LeetCode 字段的二叉树节点。",
             "What the judge passes in: a singly linked list node with the LeetCode fields.":
             "评测传入的对象：带 LeetCode 字段的单链表节点。"}


def stub(root: Path, kata: Kata, lang: str = "en") -> str:
    """The stub the candidate edits: conventions and signature from the reference, no solution. ``lang="zh"``:
    the header, the conventions and the docstrings in Chinese, from the property module's ``ZH`` (English where a
    text is missing: ``mianjing check`` reports that).

    A kernel kata (``write`` set) gets the kernels' signatures and docstrings to fill in, the launch
    wrapper (the judged symbol) whole, and the module constants those name."""
    if lang not in LANGS:
        raise ValueError(f"lang must be one of {LANGS}, got {lang!r}")
    zh = kata.zh(root) if lang == "zh" else {}
    src = (root / kata.ref_path).read_text(encoding="utf-8")
    lines = src.splitlines()
    tree = ast.parse(src)
    node = _defines(root / kata.ref_path, kata.symbol)
    assert node is not None
    props_doc = zh.get("doc") or ast.get_docstring(ast.parse((root / kata.props_path).read_text(encoding="utf-8"))) or ""
    wanted = "`, `".join(kata.write or (kata.symbol,))
    if lang == "zh":
        head = [f'r"""Kata `{kata.name}`：在下面实现 `{wanted}`；评测会在它上面运行这些性质：', ""]
        head += [f"  * {n}: {zh.get(n) or d}" for n, d in kata.properties(root)]
        head += ["", "约定（来自性质模块）：", ""]
    else:
        head = [f'r"""Kata `{kata.name}` -- write `{wanted}` below; the judge runs these properties on it:', ""]
        head += [f"  * {n}: {d}" for n, d in kata.properties(root)]
        head += ["", "Conventions (from the properties):", ""]
    head += ["  " + ln if ln else "" for ln in props_doc.replace('"""', "'''").splitlines()]
    head += ["", (f"评测命令：  mianjing kata judge {kata.name}.py" if lang == "zh" else
                  f"Judge it with:  mianjing kata judge {kata.name}.py"), '"""', MARKER + kata.name, ""]
    todo = "在这里写你的代码" if lang == "zh" else "your code here"
    imports = ["from __future__ import annotations", ""]
    for n in tree.body:
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            text = "\n".join(_segment(lines, n.lineno, n.end_lineno))
            if text.startswith(_KEEP_IMPORT_PREFIXES):
                imports.append(text)
    helpers = []
    if "from impls.coding.trees import" in src:
        helpers.append(_TREE_NODE)
    if "from impls.coding.lists import" in src:
        helpers.append(_LIST_NODE)
    for h in helpers:
        if lang == "zh":
            for en, cn in _ZH_NODES.items():
                h = h.replace(en, cn)
        imports.append(h)
    body: list[str] = ["", ""]
    if kata.write:
        return "\n".join(head + imports + body + _kernel_stub(lines, tree, kata, zh, todo)) + "\n"
    if isinstance(node, ast.FunctionDef):
        body += _def_stub(lines, node, doc=zh.get(kata.symbol), todo=todo)
    else:
        first = node.body[0]
        body += _segment(lines, node.lineno, node.lineno if node.body else node.end_lineno)
        inner = " " * first.col_offset
        if zh.get(kata.symbol):
            body += _docstring(zh[kata.symbol], inner)
        elif isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant):
            body += _segment(lines, first.lineno, first.end_lineno)
        for item in node.body:
            if isinstance(item, ast.FunctionDef) and (item.name == "__init__" or not item.name.startswith("_")):
                body.append("")
                body += _def_stub(lines, item, doc=zh.get(f"{kata.symbol}.{item.name}"), todo=todo)
    return "\n".join(head + imports + body) + "\n"


def _kernel_stub(lines: list[str], tree: ast.Module, kata: Kata, zh: dict[str, str], todo: str) -> list[str]:
    """The module constants the kernels and the wrapper name, the kernels to write (signature and docstring)
    and the wrapper whole, in the reference's order."""
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in (*kata.write, kata.symbol)}
    used = {x.id for d in defs.values() for x in ast.walk(d) if isinstance(x, ast.Name)}
    out: list[str] = []
    for n in tree.body:
        if (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                and n.targets[0].id in used and isinstance(n.value, ast.Constant)):
            out += _segment(lines, n.lineno, n.end_lineno)
    for n in tree.body:
        if isinstance(n, ast.FunctionDef) and n.name in defs:
            out += ["", ""]
            if n.name == kata.symbol:
                start = n.decorator_list[0].lineno if n.decorator_list else n.lineno
                out += _segment(lines, start, n.end_lineno)
            else:
                out += _def_stub(lines, n, doc=zh.get(n.name), todo=todo)
    return out


def given_symbols(kata: Kata) -> tuple[str, ...]:
    """The functions a kata's stub gives whole (a kernel kata's launch wrapper)."""
    return (kata.symbol,) if kata.write else ()
