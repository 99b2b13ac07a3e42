"""In the worker: compile one of the candidate's ``@triton.jit`` kernels for an NVIDIA target, as far as PTX.

A kernel kata may judge what the kernel compiles to (the matmul's ``tl.dot`` becomes Tensor-Core
instructions). Compiling is running the candidate's code: Triton's code generator evaluates the
kernel's globals, attribute lookups and calls on constant arguments, and importing the file runs its
top level. So it happens here, in a worker confined like the others (``sandbox.py``) and started
*without* ``TRITON_INTERPRET`` (``@triton.jit`` gives a compilable function), and only the PTX text
goes back. The judge treats that text as data: it parses it with the readers of
``impls/gpu/compiled.py`` (regular expressions), nothing more; a forged text can only make the forger's
own compile property pass.

Triton's pipeline is run stage by stage up to PTX (TTIR, TTGIR, LLVM IR, PTX, all in this process):
``ptxas``, the next stage, would start a process, which the worker may not; ``ptx_version`` is given by
the judge and ``mock_ptx_version`` keeps Triton from asking ``ptxas --version`` for its cache key.
"""

from __future__ import annotations

PTX_VERSION = 87  # PTX ISA 8.7 (CUDA 12.8): sm_80 and sm_90a, with mma.sync and wgmma
MAX_PTX = 8 << 20  # characters sent back at most


def ptx(module, kernel, request) -> str:
    """The PTX of ``module.<kernel>`` for ``request``: ``signature`` {parameter: "*fp16" | "i32" | ...},
    ``constexprs`` {parameter: value}, ``arch`` (80 or 90), ``num_warps``, ``num_stages``, ``aligned``
    (parameters known divisible by 16)."""
    from triton import knobs
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend

    if not isinstance(kernel, str) or not isinstance(request, dict):
        raise TypeError("a malformed compile request")
    fn = getattr(module, kernel, None)
    if type(fn).__name__ != "JITFunction":
        raise TypeError(f"`{kernel}` must be a @triton.jit function at the top level of your file (the stub's)")
    sig = dict(request.get("signature") or {})
    ce = dict(request.get("constexprs") or {})
    names = list(fn.arg_names)
    constexpr_names = [names[i] for i in fn.constexprs]
    for n in names:
        if n in constexpr_names:
            if n not in ce:
                raise TypeError(f"`{kernel}` has a tl.constexpr parameter {n} the stub does not have: keep its signature")
            sig[n] = "constexpr"
        elif n not in sig:
            raise TypeError(f"`{kernel}` has a parameter {n} the stub does not have: keep its signature")
    extra = sorted(set(sig) - set(names)) + sorted(set(ce) - set(constexpr_names))
    if extra:
        raise TypeError(f"`{kernel}` lacks the stub's parameter(s) {', '.join(extra)}: keep its signature")
    sig = {n: sig[n] for n in names}
    aligned = set(request.get("aligned") or ())
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(names) if n in aligned}
    arch = int(request.get("arch", 90))
    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    options = backend.parse_options({"num_warps": int(request.get("num_warps", 4)),
                                     "num_stages": int(request.get("num_stages", 3)),
                                     "ptx_version": int(request.get("ptx_version", PTX_VERSION))})
    knobs.nvidia.mock_ptx_version = "12.8"
    src = ASTSource(fn, sig, ce, attrs)
    stages: dict = {}
    backend.add_stages(stages, options, src.language)
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    module_ir = src.make_ir(target, options, backend.get_codegen_implementation(options), backend.get_module_map(),
                            context)
    metadata = {"hash": "judge", "target": target, **options.__dict__}
    for stage in ("ttir", "ttgir", "llir", "ptx"):
        module_ir = stages[stage](module_ir, metadata)
    text = str(module_ir)
    if len(text) > MAX_PTX:
        raise ValueError(f"the kernel compiled to {len(text) >> 20} MiB of PTX (at most {MAX_PTX >> 20} MiB)")
    return text
