"""The interleaved-state rANS decoder (issue 19): ``rans16xN`` streams (``docs/bitstream.md`` §8) through
:class:`~ansforge.hdl.rans.RansDecoderCoderXN` and its shell, ``N`` in :data:`~ansforge.hdl.rans.XN_STATES`
(5 to 16; most checks at ``N = 16``, the encoder's ``rans16x16``, the common hardware format).

Short, structural checks run in the Amaranth simulator (bit-exact against the golden model for
``N = 5, 8, 16``, random back-pressure, tables with frequencies far below a bucket, corrupt streams,
back-to-back commands, reset, a round trip through the rANS encoder core); a queue of 300 randomly corrupted streams runs in
Verilator at ``N = 16``. Whole models (stories260K and MiniLM, ``rans16x16``) are
``tests/hdl/test_whole_models.py``'s; the coder's area and lint, ``tests/hdl/test_budgets.py``'s.
"""

from __future__ import annotations

import numpy as np
import pytest

from ansforge.hdl.common import DecodeStatus
from ansforge.hdl.rans import ENCODER_XN_STATES, XN_RING, XN_STATES, RansDecoder, RansDecoderCoderXN, RansEncoder
from ansforge.model.coding.codecs import RansCodec, parse_codec
from ansforge.model.coding.stream import Run, StreamError, block_crc
from ansforge.model.errors import ConfigError
from ansforge.sim.amaranth_sim import AmaranthEngine
from ansforge.sim.jobs import CoreJob, cfg_writes, make_job, port_inputs, simulation_core, stream_words
from ansforge.sim.verilator import VerilatorEngine
from ansforge.sim.streams import pack, pairs_to_payloads, payload_shape
from ..support import (check_done_once_per_command, corrupt_words, crowded_freqs, idle_clocks, rans_table,
                      words_per_pair)

#: The state count most checks use: the one the rANS encoder core writes (``rans16x16``).
N = 16
assert N in XN_STATES and N in ENCODER_XN_STATES
CODEC = f"rans16x{N}"


def _case(seed: int, n: int, *, crowded: bool = False, codec: str = CODEC):
    """A rans16xN table (``crowded``: runs of frequency-1..3 symbols, so that buckets meet more symbols
    than the splits tell apart) and ``n`` pairs drawn from it, the crowded symbols favoured."""
    rng = np.random.default_rng(seed)
    spec = parse_codec(codec)
    if crowded:
        freqs = crowded_freqs(rng)
        table = rans_table(freqs, params=spec.rans)
        p = np.where(freqs < 4, 50.0, 1.0) * freqs
        s = rng.choice(freqs.size, size=n, p=p / p.sum())
        e = rng.integers(0, 256, size=n)
    else:
        counts = (rng.integers(1, 300, size=24) ** 2).astype(np.int64)
        ct, table = spec.tables(counts, 8)
        s, e = _draw(ct, counts, rng, n)
    return spec, table, s, e


def _draw(ct, counts, rng, n):
    """``n`` pairs with codes drawn by ``counts`` and random 8-bit additional data, as symbols of ``ct``."""
    return ct.to_symbols(rng.choice(counts.size, size=n, p=counts / counts.sum()), rng.integers(0, 256, size=n))


@pytest.mark.parametrize("states,programmable,seed,crowded", [
    (XN_RING, False, 1, False), (XN_RING, True, 2, True), (8, False, 3, True),
    (16, True, 1, False), (16, False, 2, True), (16, True, 3, True)])
def test_bit_exact_with_back_pressure(seed, crowded, programmable, states):
    """Golden words in, golden pairs out, with random valid/ready gaps on every stream, for tables whose
    frequencies go down to 1 (far below 2**(P - 8): the candidate steps); ``N`` = the ring's five
    stages, and 8 and 16 (states waiting in the delay line); baked and programmed tables. ``rans16xN`` is
    ``S = 32, W = 16`` (two pops per pair possible): on the crowded tables pairs do pop twice (counted
    from the golden rule, so the case is not vacuous: a double pop needs ``x' < 2**k`` after the symbol);
    those run without back-pressure too. (Each state count with each table kind and each table source
    once: the full cross product ran the same paths again.)"""
    spec, table, s, e = _case(seed, 400, crowded=crowded, codec=f"rans16x{states}")
    job = make_job("rans-decoder", spec, table, s, e, programmable=programmable)
    res = AmaranthEngine().run(job, stall_prob=0.3, seed=seed)
    ok, errs = job.check(res)
    assert ok, errs
    if crowded:
        pops = words_per_pair(spec.rans, table, s, e)
        assert (pops == 2).sum() >= 5, np.bincount(pops)
        plain = AmaranthEngine().run(job)
        assert job.check(plain)[0]
        assert plain.cycles > s.size + 3 * states        # the stepping path ran


@pytest.mark.parametrize("n", [0, 1, XN_RING - 1, XN_RING + 1, N - 1, N, N + 1, 2 * N + 3])
def test_streams_shorter_than_the_ring(n):
    """Streams of fewer pairs than states (some states code nothing and stay at 2**(S - W); some never
    leave the delay line) decode and pass the end check."""
    spec, table, s, e = _case(10 + n, n)
    job = make_job("rans-decoder", spec, table, s, e)
    ok, errs = job.check(AmaranthEngine().run(job, stall_prob=0.2, seed=n))
    assert ok, errs


def _corrupt_status(words_top_first: np.ndarray, n: int, core, table, *, resume: int = 0,
                    word_bits: int | None = None) -> int:
    """The status the decoder gives for ``n`` pairs from ``words_top_first`` (no CRC check; ``word_bits``:
    the stream's, where the core's port takes two words)."""
    job = CoreJob("rans-decoder", core, cfg=cfg_writes(core, [table]), pairs=n, words=int(words_top_first.size))
    job.commands = [pack(payload_shape(core, "cmd"), {"count": n, "words": int(words_top_first.size), "resume": resume,
                                                      "check_end": 1, "check_crc": 0, "crc": 0})]
    job.inputs = port_inputs(core, words_top_first, word_bits or core.word_bits)
    res = AmaranthEngine().run(job, max_cycles=4000)
    assert len(res.statuses) == 1
    return res.statuses[0]


def test_corrupt_streams_report_their_status():
    """A flipped bit (no CRC check: the decoder's own end check) ends with an error status (one
    ``done``), never a lock-up; the clean stream ends OK. (A head state out of range, a word too few,
    words cut inside the head, a word too many and a ``resume`` command each reporting their status are
    :func:`test_corrupt_streams_back_to_back`'s, at this ``N`` with back-pressure.)"""
    spec, table, s, e = _case(7, 120)
    words = spec.coder().encode([table], [Run(0, 120)], s, e).words.astype(np.uint64)
    top_first = words[::-1].copy()
    core = RansDecoder(spec, table=table)
    # A flipped bit that the golden decoder rejects (a bit of raw additional data passes the end check).
    for bit in range(spec.word_bits):
        flipped = top_first.copy()
        flipped[2 * N + 3] ^= 1 << bit
        try:
            spec.coder().decode(flipped[::-1].copy(), [table], [Run(0, 120)])
        except StreamError:
            break
    else:
        raise AssertionError("no flip of that word is detected")
    assert _corrupt_status(flipped, 120, core, table) != DecodeStatus.OK.value
    assert _corrupt_status(top_first, 120, core, table) == DecodeStatus.OK.value


def test_crc_checked():
    """``check_crc``: the command's words against the block CRC-32, a wrong one is ``CRC``."""
    spec, table, s, e = _case(8, 90)
    job = make_job("rans-decoder", spec, table, s, e)
    assert job.check(AmaranthEngine().run(job))[0]
    shape = payload_shape(job.core, "cmd")
    words = spec.coder().encode([table], [Run(0, 90)], s, e).words
    good = block_crc(np.asarray(words), word_bits=spec.word_bits)
    job.commands = [pack(shape, {"count": 90, "words": len(words), "resume": 0, "check_end": 1, "check_crc": 1,
                                 "crc": good ^ 1})]
    job.expected_status = [DecodeStatus.CRC.value]
    assert job.check(AmaranthEngine().run(job))[0]


@pytest.mark.parametrize("seed", [0, 1])
def test_hardware_round_trip_through_the_encoder_core(seed):
    """The common hardware format: the rANS encoder core (``rans16x16``) encodes random pairs, its words
    (as it wrote them, not the golden model's) go into the rANS decoder core (``rans16x16``), top of the
    stack first, and the pairs come back exactly with status OK (CRC and end check on), both runs with
    random back-pressure."""
    spec, table, s, e = _case(30 + seed, 500, crowded=bool(seed))
    golden = spec.coder().encode([table], [Run(0, s.size)], s, e).words
    if seed:                                 # crowded: pairs that move two words (not vacuous)
        assert (words_per_pair(spec.rans, table, s, e) == 2).any()
    enc = make_job("rans-encoder", spec, table, s, e, programmable=True)
    out = AmaranthEngine().run(enc, stall_prob=0.2, seed=seed).outputs
    words = stream_words(enc.core, out, spec.word_bits)
    assert np.array_equal(words, golden)
    core = RansDecoder(spec, programmable=True)
    job = CoreJob("rans-decoder", core, cfg=cfg_writes(core, [table]), pairs=s.size, words=int(words.size))
    job.commands = [pack(payload_shape(core, "cmd"), {"count": s.size, "words": int(words.size), "resume": 0,
                                                      "check_end": 1, "check_crc": 1,
                                                      "crc": block_crc(words, word_bits=spec.word_bits)})]
    job.inputs = port_inputs(core, words[::-1], spec.word_bits)
    # The encoder's 32-bit port words, last first, are the decoder's: no host repacking.
    off_o, off_i = (np.uint64(payload_shape(c, p)["data"].offset) for c, p in ((enc.core, "o"), (core, "i")))
    mask = np.uint64((1 << (2 * spec.word_bits)) - 1)
    assert np.array_equal((np.asarray(out, np.uint64) >> off_o & mask)[::-1], job.inputs >> off_i)
    job.expected = pairs_to_payloads(payload_shape(core, "o"), s, e)
    job.expected_status = [DecodeStatus.OK.value]
    ok, errs = job.check(AmaranthEngine().run(job, stall_prob=0.2, seed=seed))
    assert ok, errs


#: Idle clocks per command boundary (inputs offered, outputs taken): none. The shell reads the next
#: stream's head while the running one decodes, and its first pair follows the last pair of the one
#: before in the next turn (``RansDecoderShellXN``).
IDLE_BOUND = 0


@pytest.mark.parametrize("states", [XN_RING, 16])
@pytest.mark.parametrize("pairs", [40, 60])
def test_back_to_back_commands(states, pairs):
    """Commands queued back to back: bit-exact, one ``done`` per command in order, and no idle clock
    between two commands' pairs (a command of ``40`` pairs is fewer than ``2 N + 9`` at ``N = 16``:
    its next head is read while it still decodes; ``60`` is more)."""
    idle = idle_clocks("rans-decoder", commands=5, pairs=pairs, codec=f"rans16x{states}")
    assert max(idle) <= IDLE_BOUND, idle
    if pairs == 40:                          # independent of ``pairs``: once per state count
        check_done_once_per_command("rans-decoder", codec=f"rans16x{states}")


@pytest.mark.parametrize("n", [1, 3, N - 1, N, N + 1])
def test_short_commands_back_to_back(n):
    """Commands of at most ``N + 1`` pairs, queued: bit-exact; a command of ``c < N`` pairs injects its
    last ``N - c`` states on bubble turns, so it costs at most ``N - c + 2`` idle clocks."""
    idle = idle_clocks("rans-decoder", commands=4, pairs=n, codec=CODEC)
    assert max(idle) <= max(0, N - n) + 2, idle


def _queued(core, table, commands, inputs, segments) -> tuple[CoreJob, int]:
    """Commands back to back as one job, and a clock bound: its pairs, its port words and 40 a command.
    ``segments``: per command, (expected payloads or ``None`` where corrupt, pairs it gives)."""
    job = CoreJob("rans-decoder", core, cfg=cfg_writes(core, [table]), pairs=sum(k for _, k in segments),
                  words=int(sum(i.size for i in inputs)))
    job.commands = commands
    job.inputs = np.concatenate(inputs)
    return job, job.pairs + int(job.inputs.size) + 40 * len(commands)


def _check_segments(res, job, segments) -> None:
    """Every clean command's pairs bit-exact, in their place among all the pairs given."""
    got = np.asarray(res.outputs, dtype=np.uint64)
    assert got.size == job.pairs
    at = 0
    for expected, k in segments:
        if expected is not None:
            assert np.array_equal(got[at:at + k], expected)
        at += k


#: What each corruption of :func:`test_corrupt_streams_back_to_back` reports.
CORRUPTIONS = {"trailing": DecodeStatus.TRAILING_DATA, "trailing_many": DecodeStatus.TRAILING_DATA,
               "short": DecodeStatus.OUT_OF_WORDS, "bad_head": DecodeStatus.ZERO_TOP_WORD,
               "resume": DecodeStatus.FINAL_STATE, "head_cut": DecodeStatus.OUT_OF_WORDS}


@pytest.mark.parametrize("states,stall", [(XN_RING, 0.0), (16, 0.2)])
def test_corrupt_streams_back_to_back(states, stall):
    """Each corruption of :data:`CORRUPTIONS` queued between clean streams, commands back to back: the
    corrupt one reports its status, and the clean one after it still decodes bit-exact with OK (a
    stream's unread words are dropped, never read by the next stream; a starved pop never takes the
    next stream's word), within a bounded number of clocks."""
    spec = parse_codec(f"rans16x{states}")
    rng = np.random.default_rng(71 + states)
    counts = (rng.integers(1, 300, size=24) ** 2).astype(np.int64)
    ct, table = spec.tables(counts, 8)
    core = RansDecoder(spec, table=table)
    shape = payload_shape(core, "cmd")
    o_shape = payload_shape(core, "o")
    commands, inputs, statuses, segments = [], [], [], []
    for kind in [None, *CORRUPTIONS, *CORRUPTIONS]:
        for corrupt in ((None, kind) if kind else (None,)):
            n = int(rng.integers(states, 8 * states))
            s, e = _draw(ct, counts, rng, n)
            w = spec.coder().encode([table], [Run(0, n)], s, e).words.astype(np.uint64)[::-1].copy()
            resume = 0
            if corrupt == "trailing":
                w = np.append(w, rng.integers(0, 1 << 16, size=int(rng.integers(1, 4)), dtype=np.uint64))
            elif corrupt == "trailing_many":
                w = np.append(w, rng.integers(0, 1 << 16, size=150, dtype=np.uint64))
            elif corrupt == "short":
                w = w[:-1]
            elif corrupt == "bad_head":
                w[0] = 0
            elif corrupt == "head_cut":
                w = w[:5]
            elif corrupt == "resume":
                resume = 1
            commands.append(pack(shape, {"count": n, "words": int(w.size), "resume": resume, "check_end": 1,
                                         "check_crc": 0, "crc": 0}))
            inputs.append(port_inputs(core, w, 16))
            statuses.append((CORRUPTIONS[corrupt] if corrupt else DecodeStatus.OK).value)
            decoded = corrupt not in ("resume", "head_cut")
            segments.append((pairs_to_payloads(o_shape, s, e) if corrupt is None else None, n if decoded else 0))
    job, bound = _queued(core, table, commands, inputs, segments)
    res = AmaranthEngine().run(job, stall_prob=stall, seed=3, max_cycles=bound)
    assert res.statuses == statuses, [DecodeStatus(v).name for v in res.statuses]
    _check_segments(res, job, segments)


def test_random_corruptions_back_to_back_verilator():
    """300 ``rans16x16`` streams, every other one corrupted at random (``test_hdl_corruption``'s flips,
    bursts, truncations at either end and appended garbage), commands back to back with the block CRC
    checked, in Verilator: every corrupted stream ends with an error status, every clean one after it
    is bit-exact and OK, and the whole queue ends within its pairs, words and a constant per command."""

    spec = parse_codec(CODEC)
    rng = np.random.default_rng(123)
    counts = (rng.integers(1, 300, size=24) ** 2).astype(np.int64)
    ct, table = spec.tables(counts, 8)
    # The programmable core the whole-model runs below simulate (table through cfg): one Verilator build.
    core = simulation_core("rans-decoder", spec, [table])
    shape, o_shape = payload_shape(core, "cmd"), payload_shape(core, "o")
    commands, inputs, segments, modes = [], [], [], []
    for k in range(300):
        n = int(rng.integers(N, 400))
        s, e = _draw(ct, counts, rng, n)
        words = spec.coder().encode([table], [Run(0, n)], s, e).words.astype(np.uint64)
        top = words[::-1].copy()
        mode = None
        if k % 2:
            mode, bad = corrupt_words(rng, top, spec.word_bits)
            if np.array_equal(bad, top):            # a flip that undid itself (same bit twice)
                bad = bad.copy()
                bad[0] ^= np.uint64(1)
            top = bad
        commands.append(pack(shape, {"count": n, "words": int(top.size), "resume": 0, "check_end": 1, "check_crc": 1,
                                     "crc": block_crc(words, word_bits=spec.word_bits)}))
        inputs.append(port_inputs(core, top, spec.word_bits))
        decoded = top.size >= 2 * N                  # a stream cut inside its head gives no pair
        segments.append((pairs_to_payloads(o_shape, s, e) if mode is None else None, n if decoded else 0))
        modes.append(mode)
    job, bound = _queued(core, table, commands, inputs, segments)
    res = VerilatorEngine().run(job, max_cycles=bound)
    assert len(res.statuses) == len(commands)
    missed = [m for m, st in zip(modes, res.statuses) if m is not None and st == DecodeStatus.OK.value]
    assert not missed, f"{len(missed)} corrupted streams ended OK: {missed[:5]}"
    clean_bad = [k for k, (m, st) in enumerate(zip(modes, res.statuses)) if m is None and st != DecodeStatus.OK.value]
    assert not clean_bad, clean_bad[:5]
    _check_segments(res, job, segments)


@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
def test_codecs_it_takes_and_refuses():
    """``RansDecoder`` picks the interleaved coder for rans16xN, N = 5..16; other state counts (below the
    ring's five), shapes whose product does not fit the DSP (rans24xN, the legacy S = 48 rans16xN) and
    the encoder for a count it does not write refuse with ``ConfigError``."""
    assert XN_STATES == tuple(range(5, 17))
    for n in XN_STATES:
        core = RansDecoder(parse_codec(f"rans16x{n}"), programmable=True, shell=False)
        assert isinstance(core.blocks()["coder"], RansDecoderCoderXN)
    for name in ("rans16x2", "rans16x4", "rans24x16"):
        with pytest.raises(ConfigError):
            RansDecoder(parse_codec(name), programmable=True)
    with pytest.raises(ConfigError, match="takes streams of 1 or 5 to 16 states"):
        RansDecoder(parse_codec("rans16x3"), programmable=True)
    with pytest.raises(ConfigError):
        RansEncoder(parse_codec("rans16x5"), programmable=True)
    # The legacy S = 48 streams (one pop per pair) have no core since the one-pop datapath went.
    with pytest.raises(ConfigError, match="at most two pops per pair"):
        RansDecoder(parse_codec("rans16x5-s48w32"), programmable=True)


def test_table_sets_switch_on_the_pair():
    """Context tables (``table_sets`` > 1): runs of pairs on ``sel`` switch the table set with the pair
    that enters the ring, bit-exact with random back-pressure, runs as short as one pair."""
    rng = np.random.default_rng(21)
    spec = parse_codec(CODEC)
    tables = []
    for _ in range(3):
        counts = (rng.integers(1, 300, size=24) ** 2).astype(np.int64)
        tables.append(spec.tables(counts, 8)[1])
    runs = [Run(0, 40), Run(2, 1), Run(1, 3), Run(0, 1), Run(2, 60), Run(1, 17)]
    n = sum(r.count for r in runs)
    s = np.concatenate([rng.choice(24, size=r.count, p=tables[r.table].freqs / tables[r.table].freqs.sum())
                        for r in runs])
    e = rng.integers(0, 256, size=n)
    words = spec.coder().encode(tables, runs, s, e).words
    core = RansDecoder(spec, programmable=True, table_sets=4)
    job = CoreJob("rans-decoder", core, cfg=cfg_writes(core, tables), pairs=n, words=len(words))
    job.commands = [pack(payload_shape(core, "cmd"), {"count": n, "words": len(words), "resume": 0, "check_end": 1,
                                                      "check_crc": 1,
                                                      "crc": block_crc(np.asarray(words), word_bits=spec.word_bits)})]
    job.inputs = port_inputs(core, np.asarray(words)[::-1], spec.word_bits)
    job.side = {"sel": [pack(payload_shape(core, "sel"), {"set": r.table, "count": r.count}) for r in runs]}
    job.expected = pairs_to_payloads(payload_shape(core, "o"), s, e)
    job.expected_status = [DecodeStatus.OK.value]
    for stall in (0.0, 0.3):
        ok, errs = job.check(AmaranthEngine().run(job, stall_prob=stall, seed=4))
        assert ok, (stall, errs)


# -- Two pops per pair: 16-bit renormalisation (S = 32, W = 16, P = 16) ----------------------------------
# ``rans16xN`` is this shape: bit-exactness with and without back-pressure on tables where pairs pop twice
# is ``test_bit_exact_with_back_pressure``'s crowded cases (N = 5, 8, 16), long data in Verilator
# ``test_whole_models_one_pair_per_clock`` (N = 16); the checks below are the two-word port's own.

def _two_pop_spec(states: int):
    """The shape whose whole product fits the DSP (``16 x 17`` bits): a pair may pop before its chunk
    and again after it."""
    return RansCodec.of(32, 16, 16, states=states)


@pytest.mark.parametrize("n", [0, 1, XN_RING + 1, 2 * XN_RING + 3])
def test_two_pops_short_streams(n):
    """Streams shorter than the ring decode and pass the end check with ``S = 32, W = 16``."""
    spec = _two_pop_spec(XN_RING)
    _, table, s, e = _case(50 + n, n, codec=f"rans16x{XN_RING}")
    job = make_job("rans-decoder", spec, table, s, e)
    ok, errs = job.check(AmaranthEngine().run(job, stall_prob=0.2, seed=n))
    assert ok, errs


def test_two_pops_corrupt_streams_report_their_status():
    """A word too few (the second pop of a pair finds none), a word too many and a bad head each end
    with their status, never a lock-up."""
    spec = _two_pop_spec(XN_RING)
    _, table, s, e = _case(43, 300, crowded=True, codec=f"rans16x{XN_RING}")
    words = spec.coder().encode([table], [Run(0, s.size)], s, e).words.astype(np.uint64)
    pops = words_per_pair(spec.rans, table, s, e)
    top_first = words[::-1].copy()
    core = RansDecoder(spec, table=table)
    assert _corrupt_status(top_first, s.size, core, table, word_bits=16) == DecodeStatus.OK.value
    assert _corrupt_status(top_first[:-1], s.size, core, table, word_bits=16) == DecodeStatus.OUT_OF_WORDS.value
    # Cut right before a pair that pops twice: its second pop (or a later one) finds no word.
    j = int(np.flatnonzero(pops == 2)[0])
    cut = 2 * XN_RING + int(pops[:j].sum()) + 1
    assert _corrupt_status(top_first[:cut], s.size, core, table, word_bits=16) == DecodeStatus.OUT_OF_WORDS.value
    assert _corrupt_status(np.append(top_first, 7), s.size, core, table, word_bits=16) == DecodeStatus.TRAILING_DATA.value
    bad_head = top_first.copy()
    bad_head[0] = 0                          # a state's top word 0: the state is below 2**(S - W)
    assert _corrupt_status(bad_head, s.size, core, table, word_bits=16) != DecodeStatus.OK.value


def test_two_pops_crc_odd_and_even_word_counts():
    """The hardware CRC-32 over a command's words in decoding order, through the two-word port: for an
    odd count (a zero high word above the stream in the first port word) and an even one, the
    container's CRC (:func:`block_crc` of the stream words) passes and a wrong one is ``CRC``."""
    spec = _two_pop_spec(XN_RING)
    parities = set()
    for n in range(40, 80):
        _, table, s, e = _case(60 + n, n, codec=f"rans16x{XN_RING}")
        words = spec.coder().encode([table], [Run(0, n)], s, e).words
        if words.size % 2 in parities:
            continue
        parities.add(words.size % 2)
        job = make_job("rans-decoder", spec, table, s, e)
        assert job.inputs.size == (words.size + 1) // 2
        assert job.check(AmaranthEngine().run(job))[0], words.size
        good = block_crc(np.asarray(words), word_bits=16)
        job.commands = [pack(payload_shape(job.core, "cmd"), {"count": n, "words": int(words.size), "resume": 0,
                                                              "check_end": 1, "check_crc": 1, "crc": good ^ 4})]
        job.expected_status = [DecodeStatus.CRC.value]
        assert job.check(AmaranthEngine().run(job))[0], words.size
        if len(parities) == 2:
            break
    assert parities == {0, 1}
