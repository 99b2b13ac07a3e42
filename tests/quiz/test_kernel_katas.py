"""The kernel katas through the real judge: a right kernel is accepted, each realistic wrong kernel is rejected by the
property named for it (with the shape and values that break it), and compiling a kernel for a GPU target runs
only inside the sandbox.

The candidate's Triton kernel runs in the worker under Triton's interpreter; the compile properties (the
matmul's Tensor-Core instructions, the transpose's vector stores) compile it in a second worker, without
the interpreter, and read the PTX that comes back as text (``src/mianjing/quiz/judge_compile.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from mianjing.quiz.judge import judge
from mianjing.quiz.katas import find
from verifiers.kernels import wrong_kernels as K
from tests.quiz.kb import CHECKOUT

triton = pytest.importorskip("triton", reason="Triton has wheels for Linux x86-64/aarch64 only")


@pytest.fixture(autouse=True)
def _few_examples(monkeypatch):
    monkeypatch.setenv("MIANJING_MAX_EXAMPLES", "2")  # each example runs an interpreted kernel


def run(tmp_path, kata: str, code: str, only: list[str] | None = None, timeout: float = 120):
    k = find(CHECKOUT, kata)
    if k is None:
        pytest.skip(f"kata {kata} has not landed in this checkout")
    f = tmp_path / f"{kata}.py"
    f.write_text(code)
    return judge(CHECKOUT, k, f, only=only, timeout=timeout)


def test_the_four_kernel_katas_are_listed_on_the_kernels_track():
    from mianjing.quiz.katas import available

    kernels = {k.name: k for k in available(CHECKOUT) if k.track == "kernels"}
    assert set(kernels) >= {"triton-softmax", "triton-matmul", "triton-reduce", "triton-transpose"}, kernels


@pytest.mark.parametrize("kata", sorted(K.RIGHT))
def test_a_right_kernel_is_accepted(tmp_path, kata):
    res = run(tmp_path, kata, K.submission(kata, K.RIGHT[kata]))
    assert res.ok, [(p.name, p.reason, p.message[:500]) for p in res.props] or (res.fatal, res.fatal_detail)
    assert res.confined or not res.sandbox, res.confinement


JUDGED = [w for w in K.WRONG if w[0] in K.JUDGED]


@pytest.mark.parametrize("kata", sorted(K.RIGHT))
def test_the_chinese_stub_asks_for_the_kernel_in_chinese_and_gives_the_wrapper_whole(kata):
    from mianjing.quiz.katas import stub

    k = find(CHECKOUT, kata)
    zh, en = stub(CHECKOUT, k, "zh"), stub(CHECKOUT, k, "en")
    (kernel,) = k.write
    assert f"在下面实现 `{kernel}`" in zh and f"write `{kernel}` below" in en
    doc = zh.split(f"def {kernel}(", 1)[1].split("raise NotImplementedError", 1)[0]
    assert any("\u4e00" <= ch <= "\u9fff" for ch in doc), doc  # the kernel's docstring, in Chinese
    wrapper = en.split(f"def {k.symbol}(", 1)[1]
    assert wrapper in zh and f"{kernel}[" in wrapper  # the launch wrapper, whole and the same in both


@pytest.mark.parametrize("name, kata, body, edits, rejects, passes, says", JUDGED, ids=[w[0] for w in JUDGED])
def test_a_wrong_kernel_is_rejected_by_its_property(tmp_path, name, kata, body, edits, rejects, passes, says):
    res = run(tmp_path, kata, K.submission(kata, body, edits), only=[passes, rejects])
    assert res.fatal is None, (res.fatal, res.fatal_detail)
    by_name = {p.name: p for p in res.props}
    assert by_name[passes].passed, (passes, by_name[passes].reason, by_name[passes].message[:500])
    bad = by_name[rejects]
    assert bad.passed is False, f"{rejects} accepted {name}"
    text = bad.reason + " " + bad.message
    assert says in text, text[:800]
    assert "timed out" not in text and "crashed" not in text, text[:800]  # a counterexample, not an accident


def test_the_stub_itself_is_rejected_as_not_implemented(tmp_path):
    k = find(CHECKOUT, "triton-softmax")
    from mianjing.quiz.katas import stub

    res = run(tmp_path, "triton-softmax", stub(CHECKOUT, k), only=["prop_matches_fp64"])
    (p,) = res.props
    assert p.passed is False and "NotImplementedError" in p.message, (p.reason, p.message[:400])


# -- compiling is running the candidate's code: it happens in the sandbox only -------------------------------

# Triton's code generator calls plain Python callables it reaches through a module global (here with constant
# arguments), so compiling this kernel writes a file: the marker appears wherever the compile runs.
COMPILE_TIME_SIDE_EFFECT = r'''
import builtins


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                  INPUT_PRECISION: tl.constexpr):
    written = builtins.open("MARKER", "w").write("compiled here")
'''


def _side_effect_source(marker: str) -> str:
    text = K.submission("triton-matmul", K.MATMUL)
    head, tail = text.split("@triton.jit\ndef matmul_kernel", 1)
    kernel = COMPILE_TIME_SIDE_EFFECT.replace("MARKER", marker)
    body = tail.split('"""', 2)[2]  # the stub kernel's body after its docstring: the right kernel
    return head + kernel + body


def test_compiling_a_kernel_runs_its_code_so_the_judge_compiles_only_in_the_sandbox(tmp_path):
    marker = tmp_path / f"compiled-{uuid.uuid4().hex}"
    code = _side_effect_source(str(marker))
    # outside the judge, compiling the file (as impls/gpu/compiled.py does for this repository's own kernels) runs
    # the candidate's function: the marker appears. This is why the judge never compiles a candidate's kernel.
    src = tmp_path / "outside.py"
    src.write_text(code)
    probe = ("import sys; sys.path.insert(0, sys.argv[2]); from mianjing.quiz import judge_compile; "
             "import importlib.util as u; s = u.spec_from_file_location('c', sys.argv[1]); m = u.module_from_spec(s); "
             "s.loader.exec_module(m); from verifiers.katas.triton_matmul import MM_SIG, MM_CONSTEXPRS; "
             "judge_compile.ptx(m, 'matmul_kernel', {'signature': MM_SIG, 'constexprs': MM_CONSTEXPRS, 'arch': 80})")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", probe, str(src), str(CHECKOUT)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert marker.read_text() == "compiled here", "the code generator did not run the function: the test proves nothing"
    marker.unlink()
    # through the judge the same compile runs in the sandboxed worker: refused there, nothing appears here
    # (under bubblewrap the write lands in the sandbox's own /tmp and the compile goes on; the fallback refuses it)
    res = run(tmp_path, "triton-matmul", code, only=["prop_uses_tensor_cores"])
    assert res.props and res.props[0].passed is not None, res.summary()
    assert not marker.exists(), "the candidate's code ran outside the sandbox"
    assert res.confined, res.confinement


FORGED_PTX = r'''
import sys as _sys

def _forged(module, kernel, request):
    return "X" * (64 << 20)  # 64 MiB of "PTX": over the frame limit

if "judge_compile" in _sys.modules or True:
    try:
        import judge_compile as _jc
        _jc.ptx = _forged
    except ImportError:
        pass
'''


def test_an_oversized_compile_answer_is_a_reason_not_a_crash(tmp_path):
    """The worker's compile code can be replaced by the candidate (it runs after their import): whatever it sends
    back is data, size-limited by the wire, and the property fails with a stated cause."""
    code = K.submission("triton-matmul", K.MATMUL) + FORGED_PTX
    res = run(tmp_path, "triton-matmul", code, only=["prop_uses_tensor_cores"])
    (p,) = res.props
    assert p.passed is False and p.reason, (p.reason, p.message[:300])
    assert "Traceback" not in p.reason
