"""Measured per-matrix exponent histograms: the embedded default of ``ansforge demo``.

A user's fresh machine has no checkpoint, so the package ships *figures measured from real models*
(not weights): for each matrix, the occurrences of each exponent field of its bf16 weights. They are
enough to recompute every weight-independent row of Table 1 (Original, Simple, Ideal) and the cost of
N-bit normalized probability tables.

File format (JSON)::

    {"format": "ansforge-exponent-histograms", "version": 1,
     "models": [{"name": str, "source": str, "pairs": "bf16", "conversion": str,
                 "matrices": [{"name": str, "shape": [int, ...],
                               "exponent_counts": {"<biased exponent>": int, ...}}, ...]}]}

``ansforge histograms --model PATH -o F.json`` writes one for any checkpoint, and
``ansforge demo --histograms F.json`` reads it.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any

from ..model.errors import AnsforgeError
from .table1 import compute_table1

__all__ = ["FORMAT", "EMBEDDED", "measure_histograms", "load_histograms", "embedded_histograms"]

FORMAT = "ansforge-exponent-histograms"
EMBEDDED = "exponent_histograms.json"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def _fingerprint(path: Path) -> str:
    """``sha256 HEX`` of a checkpoint file; of a sharded folder, each shard's (``NAME sha256 HEX, ...``)."""
    if not path.is_dir():
        return f"sha256 {_sha256(path)}"
    return ", ".join(f"{p.name} sha256 {_sha256(p)}" for p in sorted(path.glob("*.safetensors")))


def measure_histograms(path: str | Path, *, name: str | None = None, pairs: str = "bf16",
                       include=(), exclude=(), jobs: int | None = None) -> dict[str, Any]:
    """Measure one model's per-matrix exponent histograms (one entry of the ``models`` list)."""
    path = Path(path)
    table = compute_table1(path, pairs=pairs, include=include, exclude=exclude, general=(),
                           constriction=False, jobs=jobs, progress=False)
    return {
        "name": name or path.stem,
        "source": f"{path.name} ({_fingerprint(path)})",
        "pairs": pairs,
        "conversion": table.conversion,
        "matrices": [{"name": m.name, "shape": list(m.shape),
                      "exponent_counts": {str(k): v for k, v in m.exponent_counts.items()}}
                     for m in table.matrices],
    }


def load_histograms(path: str | Path) -> list[dict[str, Any]]:
    """Read a histogram file, checking its structure; return its ``models`` list."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except FileNotFoundError:
        raise AnsforgeError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise AnsforgeError(f"{path}: not a JSON histogram file ({exc})") from None
    return _validate(doc, str(path))


def embedded_histograms() -> list[dict[str, Any]]:
    """The histograms shipped with ansforge (stories260K and MiniLM-L6)."""
    text = resources.files("ansforge.analysis").joinpath("data", EMBEDDED).read_text()
    return _validate(json.loads(text), f"ansforge/analysis/data/{EMBEDDED}")


def _validate(doc: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise AnsforgeError(f"{where}: field 'format' must be {FORMAT!r}")
    if doc.get("version") != 1:
        raise AnsforgeError(f"{where}: field 'version' is {doc.get('version')!r}, only 1 is known")
    models = doc.get("models")
    if not isinstance(models, list) or not models:
        raise AnsforgeError(f"{where}: field 'models' must be a non-empty list")
    for mi, model in enumerate(models):
        for m in model.get("matrices", []) if isinstance(model, dict) else [None]:
            if not isinstance(m, dict) or not isinstance(m.get("exponent_counts"), dict):
                raise AnsforgeError(f"{where}: models[{mi}] has a matrix without 'exponent_counts'")
            for k, v in m["exponent_counts"].items():
                if not (str(k).isdigit() and 0 <= int(k) < 256 and isinstance(v, int) and v >= 0):
                    raise AnsforgeError(
                        f"{where}: models[{mi}] matrix {m.get('name')!r}: exponent_counts entry {k!r}: {v!r} "
                        "is not a bf16 exponent (0..255) with a non-negative integer count")
        if not isinstance(model, dict) or not model.get("matrices"):
            raise AnsforgeError(f"{where}: models[{mi}] has no matrices")
    return models


def histograms_document(paths, *, jobs: int | None = None) -> dict[str, Any]:
    """The histogram file (the module's format) of the checkpoints at ``paths``, one ``models`` entry each."""
    return {"format": FORMAT, "version": 1, "models": [measure_histograms(p, jobs=jobs) for p in paths]}


__all__ += ["histograms_document"]
