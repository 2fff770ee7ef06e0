"""Quantized checkpoints made from a float one, to measure what the container saves on them.

:func:`quantize_checkpoint` writes, from any checkpoint ansforge reads, either a GGUF file whose
matrices are Q4_0 blocks (the ``gguf`` package's own reference quantizer, ``gguf.quants``) or a
safetensors file whose matrices are fp8 with a per-tensor scale (``NAME`` in F8_E4M3/F8_E5M2 beside a
float32 ``NAME_scale``, :func:`~ansforge.model.dtypes.quantized.to_fp8`). One-dimensional tensors
(norms, biases) stay float32, as in quantized checkpoints; non-float tensors are left out. Tensors are
read and written one at a time (the GGUF writer holds the quantized tensors, a quarter of fp32).

``ansforge quantize`` runs it; ``ansforge compress`` of the result then prints the bits per weight
and the stored fraction of each format.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..model.dtypes.quantized import FP8_FORMATS, Q4_0_BLOCK, to_fp8
from ..model.errors import ConfigError
from ..model.llm.checkpoint import SUPPORTED_DTYPES, open_checkpoint, write_safetensors

__all__ = ["QUANTIZE_FORMATS", "quantize_checkpoint"]

#: What :func:`quantize_checkpoint` writes.
QUANTIZE_FORMATS = ("q4_0", "e4m3", "e5m2")


def _float32(record) -> np.ndarray:
    a = np.asarray(record.array)
    if record.dtype == "BF16":
        return (a.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return a.astype(np.float32)


def quantize_checkpoint(model: str | os.PathLike[str], out: str | os.PathLike[str], fmt: str) -> dict:
    """Quantize every float matrix of ``model`` to ``fmt`` (``q4_0``: GGUF; ``e4m3``/``e5m2``:
    safetensors) into ``out``. A Q4_0 matrix needs rows of a multiple of 32 weights; one that has not
    is kept as float32. Returns ``{"quantized": n tensors, "weights": n, "kept": n}``."""
    if fmt not in QUANTIZE_FORMATS:
        raise ConfigError(f"format must be one of {', '.join(QUANTIZE_FORMATS)}, not {fmt!r}")
    ckpt = open_checkpoint(model)
    infos = [i for i in ckpt.infos() if i.dtype in SUPPORTED_DTYPES]
    if not infos:
        raise ConfigError(f"{model}: no float tensor to quantize")
    out = Path(out)
    if out.is_dir():
        raise ConfigError(f"{out}: is a directory")
    stats = {"quantized": 0, "weights": 0, "kept": 0}
    if fmt == "q4_0":
        import gguf
        from gguf import quants

        tmp = out.with_name(out.name + ".partial")
        try:
            w = gguf.GGUFWriter(str(tmp), "ansforge")
            for info in infos:
                a = _float32(ckpt.tensor(info.name))
                if a.ndim == 2 and a.shape[1] % Q4_0_BLOCK == 0 and a.size:
                    q = quants.quantize(a, gguf.GGMLQuantizationType.Q4_0)
                    w.add_tensor(info.name, q, raw_shape=q.shape, raw_dtype=gguf.GGMLQuantizationType.Q4_0)
                    stats["quantized"] += 1
                    stats["weights"] += a.size
                else:
                    w.add_tensor(info.name, np.ascontiguousarray(a))
                    stats["kept"] += 1
            w.write_header_to_file()
            w.write_kv_data_to_file()
            w.write_tensors_to_file()
            w.close()
            os.replace(tmp, out)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        return stats
    specs, plan = [], []
    storage = {"e4m3": "F8_E4M3", "e5m2": "F8_E5M2"}[fmt]
    for info in infos:
        if len(info.shape) >= 2:
            specs += [(info.name, storage, info.shape), (info.name + "_scale", "F32", ())]
            plan += [(info, "fp8"), (info, "scale")]
            stats["quantized"] += 1
            stats["weights"] += info.size
        else:
            specs.append((info.name, "F32", info.shape))
            plan.append((info, "f32"))
            stats["kept"] += 1
    cache: dict[str, tuple[np.ndarray, float]] = {}

    def fill(index: int, name: str):
        info, part = plan[index]
        rec = ckpt.tensor(info.name)
        if part == "f32":
            yield _float32(rec)
            return
        if info.name not in cache:  # the scale follows its tensor: convert once
            cache.clear()
            bits, conv = to_fp8(rec.array, rec.dtype, fmt)
            cache[info.name] = (bits, conv.scale)
        bits, scale = cache[info.name]
        yield bits if part == "fp8" else np.asarray([scale], np.float32)

    assert fmt in FP8_FORMATS
    write_safetensors(out, specs, fill, metadata={"ansforge": f"{fmt} with per-tensor scales from {Path(model).name}"})
    return stats
