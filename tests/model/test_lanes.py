"""Bulk lanes (Fig. 12): lane ``l`` carries pairs ``l::lanes``, and its words equal the golden
single-lane stream of that slice; the branch-free bulk decoders agree with the golden decoders."""

import numpy as np
import pytest

from ansforge.model.coding.codecs import parse_codec
from ansforge.model.errors import ConfigError
from ansforge.model.coding.lanes import decode_lanes, encode_lanes, lane_lengths, lane_pairs
from ansforge.model.coding.stream import Run, StreamError


def _case(codec, n, width=8, seed=9, n_codes=25):
    rng = np.random.default_rng(seed)
    counts = (rng.integers(1, 1000, size=n_codes) ** 2.5).astype(np.int64)
    spec = parse_codec(codec)
    ct, table = spec.tables(counts, width)
    s, e = ct.to_symbols(rng.choice(n_codes, size=n, p=counts / counts.sum()),
                         rng.integers(0, 1 << width, size=n, dtype=np.uint64))
    return spec, table, s, e


def _check_against_golden(spec, table, s, e, lanes):
    lw = encode_lanes(spec, table, s, e, lanes)
    assert len(lw) == lanes
    for i in range(lanes):
        ls, le = lane_pairs(s, i, lanes), lane_pairs(e, i, lanes)
        golden = spec.coder().encode([table], [Run(0, ls.size)], ls, le).words
        assert np.array_equal(golden, lw[i]), f"lane {i}"
    ds, de = decode_lanes(spec, table, lw, s.size)
    assert np.array_equal(ds, s) and np.array_equal(de, e)
    return lw


@pytest.mark.parametrize("codec", ["tans8", "tans11", "rans16", "rans24"])
@pytest.mark.parametrize("n, lanes", [(10007, 7), (5, 7), (0, 3), (1000, 1)])
def test_lanes_are_bit_identical_to_the_golden_model(codec, n, lanes):
    _check_against_golden(*_case(codec, n), lanes)


@pytest.mark.parametrize("codec", ["tans8", "rans24", "rans16"])
def test_wide_additional_data(codec):
    # rANS24 with 16-bit extras takes the two-pop path (k > W - P); tANS fields of up to 8 + 16 + 5 bits.
    width = 16
    _check_against_golden(*_case(codec, 4001, width=width, seed=3), 5)


def test_bulk_decoder_equals_golden_decoder_on_lane_words():
    spec, table, s, e = _case("tans8", 3000, seed=4)
    lw = encode_lanes(spec, table, s, e, 4)
    gs, ge, _ = spec.coder().decode(lw[2], [table], [Run(0, lane_pairs(s, 2, 4).size)])
    assert np.array_equal(gs, lane_pairs(s, 2, 4)) and np.array_equal(ge, lane_pairs(e, 2, 4))


def test_lane_lengths():
    assert lane_lengths(10, 4).tolist() == [3, 3, 2, 2]
    assert lane_lengths(2, 4).tolist() == [1, 1, 0, 0]
    with pytest.raises(ConfigError, match="lanes"):
        lane_lengths(10, 0)


@pytest.mark.parametrize("codec", ["tans8", "rans16"])
def test_corrupt_lane_is_named(codec):
    spec, table, s, e = _case(codec, 2000, seed=5)
    lw = encode_lanes(spec, table, s, e, 4)
    bad = [w.copy() for w in lw]
    bad[2] = bad[2][1:]          # lose the bottom word (the last one the decoder reads)
    with pytest.raises(StreamError, match="lane 2"):
        decode_lanes(spec, table, bad, s.size)
    bad = [w.copy() for w in lw]
    bad[1] = np.array([], dtype=lw[1].dtype) if codec == "tans8" else bad[1]
    bad[1][-1:] = 0 if codec == "rans16" else bad[1][-1:]
    with pytest.raises(StreamError, match="lane 1"):
        decode_lanes(spec, table, bad, s.size)
    with pytest.raises(StreamError, match="lane 3"):
        decode_lanes(spec, table, lw[:3] + [lw[3].astype(np.int64) - 70000], s.size)
