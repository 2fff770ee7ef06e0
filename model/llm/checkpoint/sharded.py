"""A Hugging Face model folder of sharded safetensors (:class:`ShardedCheckpoint`): its
``model.safetensors.index.json`` or, without one, every ``*.safetensors`` file in name order; and
the writer of such a folder (:func:`write_sharded`, :func:`layout_plan`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import CheckpointError, ConfigError
from .base import Checkpoint, EXPECTED, ITEMSIZE, TensorInfo, one_line
from .safetensors_file import SafetensorsCheckpoint, write_safetensors
from .identify import identify


#: The index file of a sharded Hugging Face folder.
INDEX_NAME = "model.safetensors.index.json"
#: The configuration file beside the shards.
CONFIG_NAME = "config.json"


def _read_text(path: Path) -> str:
    """A text file as it is (UTF-8, line ends kept), so that a writer gives it back byte for byte."""
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def shard_name(k: int, n: int) -> str:
    """Hugging Face's name of shard ``k`` (1-based) of ``n``: ``model-00001-of-00003.safetensors``."""
    return f"model-{k:05d}-of-{n:05d}.safetensors"


@dataclass(frozen=True)
class Shard:
    """One file of a sharded folder: its name in the folder, its tensors in file order, its metadata."""

    file: str
    names: tuple[str, ...]
    metadata: dict[str, str]


class ShardedCheckpoint(SafetensorsCheckpoint):
    """A Hugging Face model folder: safetensors shards read as one checkpoint.

    With ``model.safetensors.index.json``, its ``weight_map`` names each tensor's shard and gives the
    tensor order; without one, every ``*.safetensors`` file of the folder is a shard, in name order, and
    the tensors come shard by shard in file order. Each shard is validated as a
    :class:`SafetensorsCheckpoint` and its tensors are memory-mapped from it, one at a time, so no more
    of the model is in memory than a caller holds. Refused in one line each: an empty folder, a folder
    without shards, an index that is not a weight map, a shard the index names that is missing or is
    not a safetensors file, a tensor the index places in a shard that does not hold it, a tensor in two
    shards, and a shard tensor the index does not name.

    What a writer needs to give the folder back (:func:`write_sharded`, ``layout=``):
    :attr:`shards` (files, tensor names, each file's metadata), :attr:`index_text` (the index as
    read, ``None`` without one), :attr:`config_text` (``config.json`` as read, ``None`` without one);
    :meth:`layout` gathers them as JSON values. :attr:`metadata` is the shards' metadata when they all
    carry the same (as Hugging Face's ``{"format": "pt"}``), else the first shard's.
    """

    format = "safetensors"
    sharded = True

    def __init__(self, path: str | os.PathLike[str]) -> None:  # noqa: C901 - one check per refusal
        Checkpoint.__init__(self, path)
        folder = self.path
        if not folder.is_dir():
            raise CheckpointError(f"{folder}: not a directory; a sharded checkpoint is a Hugging Face model folder")
        entries = sorted(p.name for p in folder.iterdir())
        if not entries:
            raise CheckpointError(f"{folder}: an empty directory; {EXPECTED} file, or a Hugging Face model "
                                  f"folder ({INDEX_NAME} and its *.safetensors shards)")
        index_path = folder / INDEX_NAME
        self.index_text: str | None = None
        self.index_metadata: dict = {}
        weight_map: dict[str, str] | None = None
        if index_path.exists():
            try:
                self.index_text = _read_text(index_path)
                index = json.loads(self.index_text)
            except (OSError, ValueError, RecursionError) as e:
                raise CheckpointError(f"{index_path}: not a readable JSON index ({one_line(e)})") from None
            weight_map = index.get("weight_map") if isinstance(index, dict) else None
            if not isinstance(weight_map, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()):
                raise CheckpointError(f"{index_path}: not a safetensors index (it needs a \"weight_map\" object "
                                      "from tensor names to shard file names)")
            if not weight_map:
                raise CheckpointError(f"{index_path}: its weight_map names no tensor")
            meta = index.get("metadata")
            self.index_metadata = dict(meta) if isinstance(meta, dict) else {}
            files = sorted(set(weight_map.values()))
            for f in files:
                if Path(f).name != f or f in (".", ".."):
                    raise CheckpointError(f"{index_path}: shard name {f[:80]!r} is not a file name in the folder")
        else:
            files = [e for e in entries if e.endswith(".safetensors") and (folder / e).is_file()]
            if not files:
                raise CheckpointError(f"{folder}: not a checkpoint folder: no {INDEX_NAME} and no *.safetensors "
                                      f"file (it holds {', '.join(entries[:5])}{', ...' if len(entries) > 5 else ''}); "
                                      f"{EXPECTED} file, or a Hugging Face model folder")
        config = folder / CONFIG_NAME
        self.config_text: str | None = _read_text(config) if config.is_file() else None
        self.shards: list[Shard] = []
        by_name: dict[str, TensorInfo] = {}
        where: dict[str, str] = {}
        for f in files:
            p = folder / f
            if not p.exists():
                named = next(k for k, v in weight_map.items() if v == f) if weight_map else ""
                raise CheckpointError(f"{p}: missing shard (the index places {named!r} in it)")
            if p.is_dir():
                raise CheckpointError(f"{p}: a directory where the index names a shard")
            kind, what = identify(p)
            if kind != "safetensors":
                raise CheckpointError(f"{p}: shard is not a safetensors file ({what})")
            shard = SafetensorsCheckpoint(p)
            names = []
            for info in shard.infos():
                if info.name in where:
                    raise CheckpointError(f"{folder}: tensor {info.name!r} is in two shards, {where[info.name]} "
                                          f"and {f}")
                where[info.name] = f
                by_name[info.name] = TensorInfo(info.name, info.shape, info.dtype, info.offset, info.nbytes, p)
                names.append(info.name)
            self.shards.append(Shard(f, tuple(names), dict(shard.metadata)))
        if weight_map is not None:
            for name, f in weight_map.items():
                if where.get(name) != f:
                    also = f" (it is in {where[name]})" if name in where else ""
                    raise CheckpointError(f"{index_path}: tensor {name!r} is placed in {f}, which does not hold "
                                          f"it{also}")
            extra = [n for n in where if n not in weight_map]
            if extra:
                raise CheckpointError(f"{folder / where[extra[0]]}: tensor {extra[0]!r} is not in {INDEX_NAME} "
                                      f"({len(extra)} such tensors)")
            self._infos = [by_name[n] for n in weight_map]
        else:
            self._infos = [by_name[n] for s in self.shards for n in s.names]
        metas = [s.metadata for s in self.shards]
        self.metadata = dict(metas[0]) if metas else {}

    def layout(self) -> dict:
        """The folder's layout as JSON values, for :func:`write_sharded` (``layout=``) to give it back:
        ``{"index": INDEX TEXT or None, "config": CONFIG TEXT or None, "shards": [{"file", "tensors",
        "metadata"}, ...]}``."""
        return {"index": self.index_text, "config": self.config_text,
                "shards": [{"file": s.file, "tensors": list(s.names), "metadata": dict(s.metadata)}
                           for s in self.shards]}



def layout_plan(layout: object, position: dict[str, int]) -> list[tuple[str, list[int], dict[str, str]]]:
    """The shards ``(file, tensor indices, metadata)`` of a layout (which may come from a crafted
    container): every field checked, file names plain ``*.safetensors`` names in the folder, each
    tensor of ``position`` in exactly one shard; anything else is a :class:`ConfigError`."""
    def bad(why: str) -> ConfigError:
        return ConfigError(f"shard layout: {why}")

    if not isinstance(layout, dict) or not isinstance(layout.get("shards"), list) or not layout["shards"]:
        raise bad("not an object with a non-empty list of shards")
    for key in ("index", "config"):
        if not isinstance(layout.get(key), (str, type(None))):
            raise bad(f"{key} is neither a text nor null")
    plan, files, seen = [], set(), set()
    for s in layout["shards"]:
        if not isinstance(s, dict) or not isinstance(s.get("file"), str) or not isinstance(s.get("tensors"), list):
            raise bad("a shard is not an object with a file name and a list of tensors")
        f, names, meta = s["file"], s["tensors"], s.get("metadata") or {}
        if Path(f).name != f or not f.endswith(".safetensors") or f in files or f in (INDEX_NAME, CONFIG_NAME):
            raise bad(f"shard file name {f[:80]!r} is not a new *.safetensors name in the folder")
        files.add(f)
        if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
            raise bad(f"shard {f}: metadata is not an object of texts")
        for n in names:
            if not isinstance(n, str) or n not in position or n in seen:
                raise bad(f"shard {f}: tensor {str(n)[:80]!r} is not one of the tensors written, or is in two shards")
            seen.add(n)
        plan.append((f, [position[n] for n in names], dict(meta)))
    if len(seen) != len(position):
        missing = next(n for n in position if n not in seen)
        raise bad(f"tensor {missing[:80]!r} is in no shard")
    return plan


def _index_for(text: str, plan: list[tuple[str, list[int], dict[str, str]]],
               tensors: Sequence[tuple[str, str, tuple[int, ...]]]) -> str:
    """The index text of a layout, as read when its weight map names exactly the shards' tensors where
    the plan puts them; else (tensors added to a shard, e.g. an fp8 tensor's ``NAME_scale``) rebuilt
    with its other metadata, ``total_size`` recomputed and the weight map in ``tensors`` order."""
    file_of = {tensors[k][0]: f for f, ks, _ in plan for k in ks}
    try:
        index = json.loads(text)
        old = index["weight_map"]
        meta = dict(index.get("metadata") or {})
    except (ValueError, TypeError, KeyError, AttributeError):
        raise ConfigError("shard layout: its index is not a safetensors index") from None
    if old == file_of:
        return text
    meta["total_size"] = sum(ITEMSIZE[d] * int(np.prod(s, dtype=np.int64)) for _, d, s in tensors)
    return json.dumps({"metadata": meta, "weight_map": {n: file_of[n] for n, _, _ in tensors}}, indent=2) + "\n"


def write_sharded(
    folder: str | os.PathLike[str],
    tensors: Sequence[tuple[str, str, tuple[int, ...]]],
    fill: Callable[[int, str], Iterable[np.ndarray]],
    *,
    max_shard_bytes: int = 5 * 10**9,
    config: str | dict | None = None,
    metadata: dict[str, str] | None = None,
    index_metadata: dict | None = None,
    layout: dict | None = None,
) -> list[str]:
    """Write tensors as a Hugging Face sharded folder, one tensor at a time; returns the shard names.

    ``tensors`` and ``fill`` are those of :func:`write_safetensors` (``fill(index, name)``, ``index`` into
    ``tensors``). The folder is created if need be; each shard is written atomically (``.partial``, then
    renamed), the index and ``config.json`` last.

    Without ``layout``: consecutive tensors fill shards of at most ``max_shard_bytes`` of data (a tensor
    larger than that gets a shard of its own), named ``model-0000k-of-0000n.safetensors``, each with
    ``metadata`` in its header; ``model.safetensors.index.json`` holds ``{"metadata": {"total_size": ...,
    **index_metadata}, "weight_map": ...}`` with the tensors in the order given, and ``config`` (a dict,
    or a text written as is) becomes ``config.json``.

    With ``layout`` (:meth:`ShardedCheckpoint.layout` of the folder read, as JSON values): the same
    shard files holding the same tensors in the same order with the same metadata, the index text and
    the config text as read (no index / no config when the folder had none); ``tensors`` must then hold
    exactly the layout's tensors (any order: each shard is written in its own order), and
    ``max_shard_bytes``, ``config``, ``metadata`` and ``index_metadata`` must not be given.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise CheckpointError(f"{folder}: is a file, not a directory")
    position = {name: k for k, (name, _, _) in enumerate(tensors)}
    if len(position) != len(tensors):
        raise ConfigError("write_sharded: a tensor name appears twice")
    if layout is not None:
        if config is not None or metadata is not None or index_metadata is not None:
            raise ConfigError("write_sharded: layout gives the config and the metadata; do not pass them too")
        plan = layout_plan(layout, position)
        index_text, config_text = layout.get("index"), layout.get("config")
        if index_text is not None:
            index_text = _index_for(index_text, plan, tensors)
    else:
        if isinstance(max_shard_bytes, bool) or not isinstance(max_shard_bytes, int) or max_shard_bytes < 1:
            raise ConfigError(f"max_shard_bytes must be a positive integer, not {max_shard_bytes!r}")
        groups: list[list[int]] = []
        size = 0
        for k, (name, dtype, shape) in enumerate(tensors):
            nbytes = ITEMSIZE[dtype] * int(np.prod(shape, dtype=np.int64))
            if not groups or (size + nbytes > max_shard_bytes and groups[-1]):
                groups.append([])
                size = 0
            groups[-1].append(k)
            size += nbytes
        n = len(groups)
        plan = [(shard_name(i + 1, n), ks, dict(metadata or {})) for i, ks in enumerate(groups)]
        total = sum(ITEMSIZE[d] * int(np.prod(s, dtype=np.int64)) for _, d, s in tensors)
        file_of = {tensors[k][0]: f for f, ks, _ in plan for k in ks}
        index_text = json.dumps({"metadata": {"total_size": total, **(index_metadata or {})},
                                 "weight_map": {name: file_of[name] for name, _, _ in tensors}}, indent=2) + "\n"
        config_text = config if isinstance(config, str) or config is None else json.dumps(config, indent=2) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    for file, ks, meta in plan:
        write_safetensors(folder / file, [tensors[k] for k in ks], lambda i, name, ks=ks: fill(ks[i], name),
                          metadata=meta or None)
    for name, text in ((INDEX_NAME, index_text), (CONFIG_NAME, config_text)):
        if text is not None:
            tmp = folder / (name + ".partial")
            with open(tmp, "w", encoding="utf-8", newline="") as f:
                f.write(text)
            os.replace(tmp, folder / name)
    return [file for file, _, _ in plan]
