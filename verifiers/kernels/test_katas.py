"""The kernel katas' properties: every one holds for the reference, and every realistic wrong kernel of
``wrong_kernels.py`` is rejected by the property named for it (while it passes another), run here in-process under
Triton's interpreter; the rejection message is the counterexample the claim shows. tests/quiz/test_kernel_katas.py
judges some of the same files through the sandboxed judge."""

from __future__ import annotations

import importlib.util
import sys

import pytest

triton = pytest.importorskip("triton", reason="Triton has wheels for Linux x86-64/aarch64 only")

from impls.kernels import matmul, reduce, softmax, transpose  # noqa: E402  (imported: mutants of them run this file)
from verifiers.katas import triton_matmul, triton_reduce, triton_softmax, triton_transpose  # noqa: E402
from verifiers.kernels import wrong_kernels as W  # noqa: E402

KATAS = {"triton-softmax": softmax.softmax, "triton-matmul": matmul.matmul, "triton-reduce": reduce.reduce,
         "triton-transpose": transpose.transpose}
# the claim each test settles, written out (mianjing check reads the markers without running anything)
REFERENCES = [
    pytest.param("triton-softmax", marks=pytest.mark.claim("softmax.triton-kernels.match-fp64")),
    pytest.param("triton-matmul", marks=[pytest.mark.claim("gemm.triton-kernel.matches-fp64"),
                                         pytest.mark.claim("gemm.triton-kernel.tensor-cores")]),
    pytest.param("triton-reduce", marks=pytest.mark.claim("reduce.triton-kernel.matches-fp64")),
    pytest.param("triton-transpose", marks=[pytest.mark.claim("transpose.triton-kernel.exact"),
                                            pytest.mark.claim("transpose.triton-kernel.vectorized")]),
]
WRONG = {w[0]: w for w in W.WRONG}
COUNTEREXAMPLES = [
    pytest.param("softmax-no-max-subtraction", marks=pytest.mark.claim("coding.softmax-kernel.overflow-88")),
    pytest.param("softmax-row-end-unmasked", marks=pytest.mark.claim("coding.softmax-kernel.bug.padded-lanes")),
    pytest.param("matmul-k-blocks-off-by-one", marks=pytest.mark.claim("coding.tiled-matmul.bug.floor-k-steps")),
    pytest.param("matmul-fp16-accumulator", marks=pytest.mark.claim("coding.tiled-matmul.bug.fp16-accumulator")),
    pytest.param("matmul-without-tensor-cores", marks=pytest.mark.claim("coding.tiled-matmul.bug.no-tensor-cores")),
    pytest.param("reduce-max-padded-with-zero", marks=pytest.mark.claim("coding.reduce-kernel.zero-padding")),
    pytest.param("reduce-block-count-off-by-one", marks=pytest.mark.claim("coding.reduce-kernel.bug.floor-block-count")),
    pytest.param("reduce-fp16-accumulator", marks=pytest.mark.claim("coding.reduce-kernel.bug.fp16-accumulator")),
    pytest.param("transpose-one-mask-for-both", marks=pytest.mark.claim("coding.transpose-kernel.separate-bounds")),
    pytest.param("transpose-scattered-elements", marks=pytest.mark.claim("coding.transpose-kernel.bug.scattered")),
]
COMPILES = ("prop_uses_tensor_cores", "prop_stores_are_vectorized")


PROPS = {"triton-softmax": triton_softmax, "triton-matmul": triton_matmul, "triton-reduce": triton_reduce,
         "triton-transpose": triton_transpose}  # imported by name, so that a change to one reruns these claims


def _props(kata: str):
    return PROPS[kata]


def _run(prop, impl) -> None:
    if prop.__name__ in COMPILES:
        from impls.gpu.compiled import missing

        why = missing(sass=False)
        if why:
            pytest.skip(why)
    prop(impl)


def test_every_wrong_kernel_has_its_claim():
    assert {p.values[0] for p in COUNTEREXAMPLES} == set(WRONG)
    assert {p.values[0] for p in REFERENCES} == set(KATAS)


@pytest.mark.parametrize("kata", REFERENCES)
def test_every_property_holds_for_the_reference(device, kata, evidence):
    if device.type != "cpu":
        pytest.skip("the katas run in the interpreter")
    ref = KATAS[kata]
    for prop in _props(kata).ALL:
        _run(prop, ref)
    evidence["properties"] = [p.__name__ for p in _props(kata).ALL]


def _load(name: str, source: str):
    """Import the submission from build/wrong-kernels/ (a fixed path: its compiled code is cached by content)."""
    folder = W.CHECKOUT / "build" / "wrong-kernels"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name.replace('-', '_')}.py"
    if not path.is_file() or path.read_text() != source:
        path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"wrong_{name.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", COUNTEREXAMPLES)
def test_a_wrong_kernel_fails_its_property(device, evidence, name):
    if device.type != "cpu":
        pytest.skip("the katas run in the interpreter")
    _, kata, body, edits, rejects, passes, says = WRONG[name]
    module = _load(name, W.submission(kata, body, edits))
    impl = getattr(module, KATAS[kata].__name__)
    props = _props(kata)
    _run(getattr(props, passes), impl)
    with pytest.raises(AssertionError) as caught:
        _run(getattr(props, rejects), impl)
    message = str(caught.value).split("\nassert")[0]
    assert says in message, message
    evidence["counterexample"] = {"wrong kernel": name, "rejected by": rejects, "passes": passes,
                                  "message": message[:600]}
