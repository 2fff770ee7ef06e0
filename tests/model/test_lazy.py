"""``ansforge.safe_open``: a container opened lazily, tensors decoded on first access from only the blocks
they (or the rows asked for) lie in, equal to what ``decompress`` writes."""

from __future__ import annotations

import numpy as np
import pytest
from safetensors import safe_open as st_open

import ansforge
from ansforge.model.coding.container import compress_checkpoint, open_container
from ansforge.model.errors import ConfigError

EMB = "tok_embeddings.weight"   # 512 × 64 values: 8 blocks of 4096 pairs


@pytest.fixture(scope="module", params=["auto", "bf16"])
def pair(stories, tmp_path_factory, request):
    """A container of stories260K cut into blocks of 4096 pairs (fp32 as stored, or bf16) and its
    decompressed safetensors file."""
    d = tmp_path_factory.mktemp("lazy")
    f = d / "s.ansf"
    compress_checkpoint(stories, f, pairs=request.param, block_pairs=4096)
    open_container(f).decompress(d / "s.safetensors")
    return f, d / "s.safetensors"


def _reference(path):
    """The decompressed file's tensors (bf16 read as its uint16 patterns, as ansforge hands them out)."""
    with st_open(str(path), framework="numpy") as f:
        out = {}
        for name in f.keys():
            sl = f.get_slice(name)
            out[name] = f.get_tensor(name) if sl.get_dtype() != "BF16" else None
    if any(v is None for v in out.values()):
        from ansforge.model.llm.checkpoint import open_checkpoint
        ck = open_checkpoint(path)
        out = {name: np.asarray(ck.tensor(name).array) for name in out}
    return out


def test_tensors_equal_decompress_and_decode_only_their_blocks(pair):
    f, st = pair
    ref = _reference(st)
    with ansforge.safe_open(f, framework="numpy") as lazy:
        # decompress's order (the source's); opening decodes nothing
        assert sorted(lazy.keys()) == sorted(ref) and lazy.keys()[0] == EMB and lazy.blocks_decoded == 0
        assert lazy.metadata() == {"ansforge": f"decompressed from {f.name}"}
        shape, dtype = lazy.spec(EMB)
        assert shape == (512, 64) and dtype in ("F32", "BF16")
        w = lazy.get_tensor("layers.0.attention.wq.weight")                  # 4096 pairs: one block
        assert lazy.blocks_decoded == 1 and w.dtype == ref["layers.0.attention.wq.weight"].dtype
        assert np.array_equal(w, ref["layers.0.attention.wq.weight"])
        sl = lazy.get_slice(EMB)
        assert sl.get_shape() == [512, 64] and lazy.blocks_decoded == 1       # a slice decodes on indexing
        rows = sl[70:130]                                                     # rows 70..129: pairs 4480..8319
        assert lazy.blocks_decoded == 3 and np.array_equal(rows, ref[EMB][70:130])
        for key in (5, -1, slice(500, 600), slice(130, 70, -3), (slice(2, 9), slice(1, 5)), slice(10, 10), ...):
            assert np.array_equal(sl[key], ref[EMB][key]), key
        before = lazy.blocks_decoded
        assert np.array_equal(lazy.get_tensor(EMB), ref[EMB]) and lazy.blocks_decoded == before + 8
        for name in lazy.keys():
            assert np.array_equal(lazy.get_tensor(name), ref[name]), name
        with pytest.raises(ConfigError, match="no tensor named 'nope'"):
            lazy.get_tensor("nope")


def test_torch_through_from_numpy_and_refusals(pair, stories):
    f, _ = pair
    with pytest.raises(ConfigError, match="torch.from_numpy"):
        ansforge.safe_open(f, framework="pt")
    with pytest.raises(ConfigError, match="device 'cuda'"):
        ansforge.safe_open(f, device="cuda")
    import torch        # the test-data extra installs it (CI has it); the product never imports it
    with ansforge.safe_open(f) as lazy:
        a = lazy.get_tensor(EMB)
        t = torch.from_numpy(a) if a.dtype != np.uint16 else torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        assert tuple(t.shape) == (512, 64)
