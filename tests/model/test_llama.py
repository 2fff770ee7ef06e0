"""The NumPy llama, its loaders, tokenizer and sampler, and the weight paths that feed it.

The forward pass is checked against an independent whole-sequence formulation (causal mask instead of
a KV cache, RoPE as complex rotations by the exporter's own ``freq_cis`` tables, repeated kv heads);
the raw, software and hardware (Verilator) weight paths must give identical logits; the three file
layouts must give the same logits; the tokenizer reproduces known Llama-2 ids.
"""

from __future__ import annotations

import io
import json
import struct

import numpy as np
import pytest

from ansforge.model.llm.checkpoint import open_checkpoint
from ansforge.model.errors import AnsforgeError, CheckpointError, ConfigError
from ansforge.model.llm.llama import (CheckpointWeights, Llama, LlamaWeights, hf_rope_permutation, read_layout,
                                  undo_hf_rope_permutation)
from ansforge.model.llm.llama_convert import export_gguf_llama, export_hf_llama
from ansforge.model.llm.sampler import Sampler
from ansforge.model.llm.tokenizer import Tokenizer, TokenizerError
from ansforge.sim.llama_run import load_llama, run_generation
from ansforge.sim.weights import HardwareWeights

from ..conftest import SHARED
from ..support import ansforge

TOKENIZER = SHARED / "models" / "tokenizer.bin"


def _reference_logits(path, tokens: list[int]) -> np.ndarray:
    """All positions at once, in float64: causal softmax attention, complex RoPE from the file's tables."""
    ck = open_checkpoint(path)
    c = ck.config
    w = {i.name: np.asarray(ck.tensor(i.name).array, dtype=np.float64) for i in ck.infos()}
    hs, T = c.dim // c.n_heads, len(tokens)
    rot = w["freq_cis_real"][:T] + 1j * w["freq_cis_imag"][:T]            # (T, hs/2)

    def rope(m, heads):                                                   # m: (T, heads*hs)
        z = m.reshape(T, heads, hs // 2, 2)
        z = (z[..., 0] + 1j * z[..., 1]) * rot[:, None, :]
        return np.stack([z.real, z.imag], -1).reshape(T, heads * hs)

    def norm(x, g):
        return g * x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5)

    x = w["tok_embeddings.weight"][tokens]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for layer in range(c.n_layers):
        p = f"layers.{layer}."
        h = norm(x, w[p + "attention_norm.weight"])
        q = rope(h @ w[p + "attention.wq.weight"].T, c.n_heads).reshape(T, c.n_heads, hs)
        k = rope(h @ w[p + "attention.wk.weight"].T, c.n_kv_heads).reshape(T, c.n_kv_heads, hs)
        v = (h @ w[p + "attention.wv.weight"].T).reshape(T, c.n_kv_heads, hs)
        k, v = (np.repeat(a, c.n_heads // c.n_kv_heads, axis=1) for a in (k, v))
        s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(hs) + mask
        a = np.exp(s - s.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        x = x + np.einsum("hqk,khd->qhd", a, v).reshape(T, c.dim) @ w[p + "attention.wo.weight"].T
        h = norm(x, w[p + "ffn_norm.weight"])
        g, u = h @ w[p + "feed_forward.w1.weight"].T, h @ w[p + "feed_forward.w3.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "feed_forward.w2.weight"].T
    return norm(x, w["norm.weight"]) @ w["tok_embeddings.weight"].T


def test_forward_matches_a_whole_sequence_reference(stories):
    model = load_llama(stories).model
    rng = np.random.default_rng(0)
    tokens = [1] + rng.integers(3, 512, size=40).tolist()
    ref = _reference_logits(stories, tokens)
    for pos, t in enumerate(tokens):
        got = model.forward(t, pos)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, ref[pos], rtol=0, atol=2e-4 * np.abs(ref[pos]).max())


@pytest.mark.parametrize("codec, pairs", [("tans8", "fp32"), ("rans16", "bf16")])
def test_hardware_path_gives_identical_logits(stories, codec, pairs):
    """stories260K decompressed by the decoder core in Verilator: logits equal at all 64 steps."""
    out, err = io.StringIO(), io.StringIO()
    gen, setup = run_generation(stories, via="hardware", codec=codec, pairs=pairs, engine="verilator", steps=64,
                                temperature=0, ids=True, compare=True, out=out, err=err)
    assert gen.compared and gen.mismatch is None and gen.steps == 64, err.getvalue()
    raw, _ = run_generation(stories, via="raw", pairs=pairs, steps=64, temperature=0, ids=True,
                            out=io.StringIO(), err=io.StringIO())
    assert gen.tokens == raw.tokens and len(gen.tokens) == 64
    assert out.getvalue().split() == [str(t) for t in gen.tokens]
    hw = setup.provider
    assert hw.pairs == 260_032 and hw.cycles >= hw.pairs            # every float tensor, one pair per clock at most
    # bf16 pairs are the bf16-rounded model, held as 16-bit in memory: not the fp32 one
    w = setup.model.weights["layers.0.attention.wq.weight"]
    assert w.dtype == ("F32" if pairs == "fp32" else "BF16")
    if pairs == "bf16":
        assert not np.array_equal(load_llama(stories).model.forward(1, 0), setup.model.forward(1, 0))


def test_cli_generate_compare_hardware(stories):
    r = ansforge("generate", "--model", stories, "--via", "hardware", "--pairs", "fp32", "--engine", "verilator",
                 "--steps", "64", "--temperature", "0", "--compare", "--ids")
    assert r.returncode == 0, r.stderr
    assert "logits identical to the raw path at all 64 steps" in r.stderr
    assert "tokens/s" in r.stderr and "weights/s simulated" in r.stderr
    assert len(r.stdout.split()) == 64 and all(t.isdigit() for t in r.stdout.split())
    assert "no matching tokenizer" in r.stderr            # tokenizer.bin beside it has 32000 tokens, not 512


def test_software_path_and_an_existing_container(stories, tmp_path):
    f = tmp_path / "s.ansf"
    assert ansforge("compress", "--model", stories, "--codec", "rans24", "--layout", "model", "-o", f).returncode == 0
    gen, _ = run_generation(stories, via="software", container=f, steps=32, temperature=0.9, topp=0.9, seed=5,
                            ids=True, compare=True, out=io.StringIO(), err=io.StringIO())
    assert gen.mismatch is None and len(gen.tokens) > 0
    # a model-layout container shares one stream among all tensors: the decoder core cannot switch tables
    # mid-command (the default blocks layout decodes in hardware: tests/sim/test_blocks_hardware.py)
    with pytest.raises(ConfigError, match="one stream per tensor"):
        HardwareWeights(f)


def test_hardware_provider_in_the_amaranth_simulator(stories, tmp_path):
    """A few small tensors through the Amaranth engine (the whole model runs in Verilator above)."""
    hw = HardwareWeights.from_checkpoint(stories, tmp_path / "s.ansf", "tans8", "bf16", engine="amaranth")
    raw = CheckpointWeights(stories, "bf16")
    for name in ("layers.0.attention_norm.weight", "norm.weight", "layers.1.attention.wk.weight"):
        a, dt = hw.tensor(name)
        b, dt2 = raw.tensor(name)
        assert dt == dt2 == "BF16" and np.array_equal(a, b)
    assert hw.pairs == 64 + 64 + 2048


def test_the_three_file_layouts_give_the_same_logits(stories, tmp_path):
    hf = export_hf_llama(stories, tmp_path)
    gguf_path = export_gguf_llama(stories, tmp_path / "stories.gguf")
    assert open_checkpoint(hf).format == "safetensors" and open_checkpoint(gguf_path).format == "gguf"
    # the HF file really holds permuted q/k rows
    wq = np.asarray(open_checkpoint(hf).tensor("model.layers.0.self_attn.q_proj.weight").array)
    assert not np.array_equal(wq, open_checkpoint(stories).tensor("layers.0.attention.wq.weight").array)
    models = [load_llama(p).model for p in (stories, hf, gguf_path)]
    tok = 1
    for pos in range(48):
        logits = [m.forward(tok, pos) for m in models]
        for other in logits[1:]:
            np.testing.assert_allclose(other, logits[0], rtol=0, atol=1e-6)
        tok = int(logits[0].argmax())


def test_hf_permutation_is_rotate_half_rope():
    """HF applies RoPE by rotate_half on its permuted rows; that must equal interleaved RoPE on ours."""
    rng = np.random.default_rng(1)
    heads, hs, d = 3, 8, 5
    w = rng.standard_normal((heads * hs, d))
    x = rng.standard_normal(d)
    ang = rng.uniform(0, 6, hs // 2)
    c, s = np.cos(ang), np.sin(ang)
    q = (w @ x).reshape(heads, hs // 2, 2)
    ours = np.stack([q[..., 0] * c - q[..., 1] * s, q[..., 0] * s + q[..., 1] * c], -1).reshape(heads, hs)
    qh = (hf_rope_permutation(w, heads) @ x).reshape(heads, hs)
    cc, ss = np.concatenate([c, c]), np.concatenate([s, s])
    rot_half = np.concatenate([-qh[:, hs // 2:], qh[:, :hs // 2]], 1)
    hf = qh * cc + rot_half * ss
    np.testing.assert_allclose(hf_rope_permutation(ours.reshape(-1, 1), heads).reshape(heads, hs), hf, atol=1e-12)
    assert np.array_equal(undo_hf_rope_permutation(hf_rope_permutation(w, heads), heads), w)


def test_bf16_weights_stay_16_bit_in_memory(stories):
    layout = read_layout(stories)
    w32 = LlamaWeights.load(layout, CheckpointWeights(stories, "bf16"), "fp32")
    w16 = LlamaWeights.load(layout, CheckpointWeights(stories, "bf16"))
    assert w16.nbytes * 2 == w32.nbytes
    m32, m16 = Llama(w32), Llama(w16)
    for pos, t in enumerate([1, 5, 300, 7]):
        assert np.array_equal(m32.forward(t, pos), m16.forward(t, pos))   # widening is exact


# ----------------------------------------------------------------------------------------------
# Tokenizer and sampler


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer.load(TOKENIZER, 32000)


def test_tokenizer_known_ids_and_round_trips(tokenizer):
    # Llama-2's SentencePiece ids: "▁Hello" 15043, "▁world" 3186
    assert tokenizer.encode("Hello world") == [1, 15043, 3186]
    assert tokenizer.encode("Hello world", bos=False, eos=True) == [15043, 3186, 2]
    for text in ["Once upon a time, there was a little girl.", "  two spaces\nand a newline\t!",
                 "naïve café — Grüße, 日本語, Ελληνικά", "x"]:
        ids = tokenizer.encode(text)
        assert ids[0] == 1 and tokenizer.decode(ids[1:]) == text


def test_tokenizer_byte_fallback(tokenizer):
    text = "llama \U0001F999 and \u0f3a"
    ids = tokenizer.encode(text)
    raw = "\U0001F999".encode()
    assert [b + 3 for b in raw] == ids[ids.index(raw[0] + 3):ids.index(raw[0] + 3) + 4]
    assert all(tokenizer.pieces[b + 3] == f"<0x{b:02X}>".encode() for b in raw)
    assert tokenizer.decode(ids[1:]) == text


def test_tokenizer_bad_files(tmp_path):
    with pytest.raises(TokenizerError, match="vocab_size is 512"):
        Tokenizer.load(TOKENIZER, 512)
    cut = tmp_path / "cut.bin"
    cut.write_bytes(TOKENIZER.read_bytes()[:1000])
    with pytest.raises(TokenizerError, match="cut.bin: truncated at token|past the end"):
        Tokenizer.load(cut)


def test_sampler():
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05], np.float32))
    assert Sampler(0.0, 0.9, 1).sample(logits) == 0
    n = 20000
    s = Sampler(1.0, 1.0, 3)
    freq = np.bincount([s.sample(logits) for _ in range(n)], minlength=4) / n
    np.testing.assert_allclose(freq, [0.5, 0.3, 0.15, 0.05], atol=0.015)
    s = Sampler(1.0, 0.7, 3)               # nucleus {0, 1}: 0.5 + 0.3 > 0.7
    freq = np.bincount([s.sample(logits) for _ in range(n)], minlength=4) / n
    np.testing.assert_allclose(freq, [0.625, 0.375, 0, 0], atol=0.015)
    a, b = Sampler(1.0, 0.9, 99), Sampler(1.0, 0.9, 99)
    assert [a.sample(logits) for _ in range(50)] == [b.sample(logits) for _ in range(50)]
    for bad in (dict(temperature=-1), dict(topp=1.5), dict(seed=0)):
        with pytest.raises(ConfigError):
            Sampler(**{"temperature": 1.0, "topp": 0.9, "seed": 1, **bad})


# ----------------------------------------------------------------------------------------------
# Bad input


def _tiny_llama2c(path, vocab=32000, seq_len=8, dim=16, hidden=32, layers=1, heads=2, kv=1):
    rng = np.random.default_rng(0)
    hs = dim // heads
    n = (vocab * dim + layers * (2 * dim + 2 * dim * dim + 2 * kv * hs * dim + 3 * dim * hidden) + dim
         + seq_len * hs)
    path.write_bytes(struct.pack("<7i", dim, hidden, layers, heads, kv, vocab, seq_len)
                     + (rng.standard_normal(n) * 0.1).astype("<f4").tobytes())
    return path


def test_prompt_longer_than_the_context(tmp_path):
    m = _tiny_llama2c(tmp_path / "tiny.bin")
    gen, _ = run_generation(m, tokenizer=TOKENIZER, prompt="Hi", steps=3, temperature=0, out=io.StringIO(),
                            err=io.StringIO())
    assert gen.steps == 4          # BOS, space+Hi merged to one token, then three sampled
    r = ansforge("generate", "--model", m, "--tokenizer", TOKENIZER, "--prompt", "one two three four five six seven eight")
    assert r.returncode == 2 and "the prompt is 9 tokens, longer than the model's context (seq_len = 8)" in r.stderr


def test_mismatched_tokenizer_and_prompt_without_one(stories):
    r = ansforge("generate", "--model", stories, "--tokenizer", TOKENIZER, "--steps", "2")
    assert r.returncode == 2 and "tokenizer has 32000 tokens but the model's vocab_size is 512" in r.stderr
    r = ansforge("generate", "--model", stories, "--prompt", "Once", "--steps", "2")
    assert r.returncode == 2 and "--prompt needs a tokenizer" in r.stderr


def test_dimensions_that_disagree_with_tensors(stories, tmp_path):
    export_hf_llama(stories, tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg["intermediate_size"] = 160
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"'model.layers.0.mlp.gate_proj.weight' has shape \(172, 64\).*"
                                              r"hidden_dim=160.*implies \(160, 64\)"):
        read_layout(tmp_path / "model.safetensors")
    r = ansforge("generate", "--model", tmp_path / "model.safetensors", "--steps", "1")
    assert r.returncode == 2 and "gate_proj" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "config.json").unlink()
    with pytest.raises(CheckpointError, match="needs its config.json"):
        read_layout(tmp_path / "model.safetensors")
    with pytest.raises(AnsforgeError, match="position 8 is outside the context"):
        load_llama(_tiny_llama2c(tmp_path / "t.bin")).model.forward(1, 8)
