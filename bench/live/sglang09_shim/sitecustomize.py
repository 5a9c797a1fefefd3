"""Device-side compatibility shim: SGLang 0.5.9 (pins torch 2.9.1, sgl-kernel 0.3.21) on the
0.5.16 bundle's stack (torch 2.11, sglang-kernel 0.4.x). probe_release.sh puts this folder on
the PYTHONPATH of its 0.5.9 servers only (behind a hook directory, whose sitecustomize runs this
one as the module it shadows). Measured in ../shared/live-sglang/sglang-0.5.9-on-h200.md:

* ``sgl_kernel`` gets a module ``__getattr__``: a name 0.5.9 imports that this kernel build no
  longer has (``awq_marlin_moe_repack``, ...; none on a Llama model's path) becomes a stub that
  raises ``NotImplementedError`` only when called;
* ``torch.library.register_fake`` skips operators the kernel build lacks
  (``sgl_kernel::moe_fused_gate`` at 0.5.9's import time) instead of raising;
* with ``SGTRACE_PROBE_ROPE=torch``: 0.5.9's JIT rope kernel (compiled against flashinfer's
  headers; 0.6.14's do not compile with 0.5.9's flags) is replaced, right after
  ``sglang.jit_kernel.rope`` loads, by a PyTorch version of the same in-place rotation.

Stdlib + torch only; prints one ``sglang09-shim:`` line per patch to stderr.
"""

import importlib.abc
import importlib.machinery
import os
import sys


def _say(text):
    print("sglang09-shim: " + text, file=sys.stderr, flush=True)


class _Missing:
    def __init__(self, name):
        self._name = name

    def __call__(self, *args, **kwargs):
        raise NotImplementedError("sgl_kernel." + self._name + " missing in this kernel build")

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Missing(self._name + "." + attr)


def _module_getattr(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _Missing(name)


def _patch_kernel():
    import sgl_kernel
    import torch.library as tl

    sgl_kernel.__getattr__ = _module_getattr
    original = tl.register_fake

    def register_fake(op, func=None, /, *args, **kwargs):
        def safe(f):
            try:
                return original(op, f, *args, **kwargs)
            except RuntimeError as exc:
                if "does not exist" in str(exc):
                    return f
                raise

        return safe(func) if func is not None else safe

    tl.register_fake = register_fake


def rope_torch(
    positions,
    query,
    key,
    head_size,
    cos_sin_cache,
    is_neox=True,
    fused_set_kv_buffer_arg=None,
    enable_pdl=None,
):
    """``apply_rope_with_cos_sin_cache_inplace`` in PyTorch: rotates the first ``rotary_dim``
    (= ``cos_sin_cache.shape[-1]``) channels of every head of ``query`` and ``key`` in place;
    cos is the cache's first half, sin its second (CUDA-graph capturable: no host sync)."""
    if fused_set_kv_buffer_arg is not None:
        raise NotImplementedError("sglang09-shim rope: fused_set_kv_buffer_arg")
    import torch

    n = positions.shape[0]
    cos, sin = cos_sin_cache.index_select(0, positions.reshape(-1).long()).float().chunk(2, -1)
    cos, sin = cos[:, None, :], sin[:, None, :]
    rot = cos_sin_cache.shape[-1]
    for x in (query, key):
        if x is None:
            continue
        heads = x.view(n, -1, head_size)
        part = heads[..., :rot].float()
        if is_neox:
            x1, x2 = part[..., : rot // 2], part[..., rot // 2 :]
            out = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1)
        else:
            x1, x2 = part[..., 0::2], part[..., 1::2]
            out = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1).flatten(-2)
        heads[..., :rot].copy_(out.to(x.dtype))


class _RopeFinder(importlib.abc.MetaPathFinder):
    """Replaces ``apply_rope_with_cos_sin_cache_inplace`` as soon as its module has run, before
    ``sglang.srt.layers.rotary_embedding`` imports the name."""

    target = "sglang.jit_kernel.rope"

    def find_spec(self, fullname, path, target=None):
        if fullname != self.target:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            module.apply_rope_with_cos_sin_cache_inplace = rope_torch
            _say("rope -> torch (" + self.target + ".apply_rope_with_cos_sin_cache_inplace)")

        spec.loader.exec_module = exec_module
        return spec


try:
    _patch_kernel()
except ImportError as exc:
    _say("sgl_kernel not patched: " + repr(exc))
if os.environ.get("SGTRACE_PROBE_ROPE") == "torch":
    sys.meta_path.insert(0, _RopeFinder())
