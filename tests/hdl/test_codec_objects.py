"""Issue 17: one codec object per kind, the cores built from it, and the one pair-packing helper."""

from __future__ import annotations

import numpy as np
import pytest

from ansforge.hdl.cores import CORE_CLASSES, build_core
from ansforge.hdl.rans import RansDecoder
from ansforge.hdl.tans import TansXnDecoder
from ansforge.model.coding.codecs import Codec, RansCodec, TansCodec, parse_codec
from ansforge.model.errors import ConfigError
from ansforge.sim.jobs import cfg_writes
from ansforge.sim.streams import pairs_to_payloads, payload_shape, payloads_to_pairs


@pytest.mark.parametrize("name, cls", [("tans8", TansCodec), ("tans12", TansCodec), ("rans16", RansCodec),
                                       ("rans24", RansCodec), ("rans9", RansCodec)])
def test_parse_gives_the_kind_and_json_round_trips(name, cls):
    codec = parse_codec(name)
    assert isinstance(codec, cls) and codec.kind == name[:4]
    assert Codec.from_json(codec.to_json()) == codec


def test_from_json_refuses_unknown_kinds_and_bad_records():
    with pytest.raises(ConfigError, match="kind"):
        Codec.from_json({"name": "x", "kind": "huffman"})
    with pytest.raises(ConfigError, match="malformed"):
        Codec.from_json({"name": "tans8", "kind": "tans"})
    with pytest.raises(ConfigError, match="table_log"):
        Codec.from_json({**parse_codec("tans8").to_json(), "table_log": 13})


def test_tables_is_the_two_steps():
    counts = np.array([50, 30, 10, 5, 3, 1, 1], dtype=np.int64)
    for name in ("tans8", "rans16", "rans24"):
        codec = parse_codec(name)
        ct, table = codec.tables(counts, 8)
        assert ct == codec.code_table(counts, 8)
        assert isinstance(table, codec.table_type)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_cores_take_the_codec_and_validate_loose_arguments_once():
    tans = parse_codec("tans8")
    assert isinstance(build_core(tans, "decoder", programmable=True), CORE_CLASSES[("tans", "decoder")])
    assert isinstance(build_core(tans, "encoder", programmable=True), CORE_CLASSES[("tans", "encoder")])
    assert isinstance(build_core(parse_codec("rans16"), "decoder", programmable=True), RansDecoder)
    assert len(CORE_CLASSES) == 4
    assert TansXnDecoder(table_log=8, programmable=True).codec == TansCodec.of(8, 16)
    with pytest.raises(ConfigError, match="tANS table_log"):      # the codec's message, not a second copy
        TansXnDecoder(table_log=4, programmable=True)
    with pytest.raises(TypeError, match="not both"):
        TansXnDecoder(tans, table_log=9, programmable=True)
    with pytest.raises(TypeError, match="TansCodec"):
        TansXnDecoder(parse_codec("rans16"), programmable=True)
    with pytest.raises(ValueError, match="decoder"):
        build_core(tans, "decompressor")


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_pair_packing_round_trips_and_cfg_writes_pack_the_core_writes():
    codec = parse_codec("tans8")
    counts = np.array([40, 20, 10, 5, 1], dtype=np.int64)
    _, table = codec.tables(counts, 8)
    core = build_core(codec, "decoder", programmable=True)
    shape = payload_shape(core, "o")
    rng = np.random.default_rng(1)
    s, e = rng.integers(0, 5, 100), rng.integers(0, 256, 100).astype(np.uint64)
    s2, e2 = payloads_to_pairs(shape, pairs_to_payloads(shape, s, e))
    assert np.array_equal(s2, s) and np.array_equal(e2, e)
    assert len(cfg_writes(core, [table])["cfg"]) == len(core.table_writes([table])["cfg"]) == 256
