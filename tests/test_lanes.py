"""Bulk lanes (Fig. 12): each lane's words equal the golden single-lane stream of its slice."""

import numpy as np
import pytest

from ansforge.model.codecs import parse_codec
from ansforge.model.lanes import decode_lanes, encode_lanes, split_lanes
from ansforge.model.stream import Run


@pytest.mark.parametrize("codec", ["tans8", "tans11", "rans16", "rans24"])
def test_lanes_are_bit_identical_to_the_golden_model(codec):
    rng = np.random.default_rng(9)
    counts = (rng.integers(1, 1000, size=25) ** 2.5).astype(np.int64)
    spec = parse_codec(codec)
    ct = spec.code_table(counts, 8)
    table = spec.coder_table(ct, counts)
    n = 10007
    s, e = ct.to_symbols(rng.choice(25, size=n, p=counts / counts.sum()), rng.integers(0, 256, size=n))
    bounds = split_lanes(n, 7)
    lanes = encode_lanes(spec, table, s, e, 7)
    for i in range(7):
        a, b = int(bounds[i]), int(bounds[i + 1])
        golden = spec.coder().encode([table], [Run(0, b - a)], s[a:b], e[a:b]).words
        assert np.array_equal(golden, lanes[i])
    ds, de = decode_lanes(spec, table, lanes, np.diff(bounds))
    assert np.array_equal(ds, s) and np.array_equal(de, e)
