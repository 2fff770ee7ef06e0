"""The decoder and encoder contracts (``sim/formal/contract.py``), in simulation, on every build of the core
registry at its shipped datapath; and the mutant catalogue, at the shipped datapath, caught in simulation.

The same :class:`~ansforge.sim.formal.contract.CoreContract` that ``ansforge prove`` asserts formally on
the small builds runs here beside the builds a user gets (``tans8x16``, ``rans16x16``, the interleaved
rows, the paper's one-state codecs): every run of :class:`~ansforge.sim.amaranth_sim.AmaranthEngine`
elaborates it next to a registered core, and Amaranth's simulator raises ``AssertionError`` with the
clause's message in the clock a clause fails. Each scenario below also checks what the ports alone
cannot show: the golden model's pairs, words and statuses.
"""

from __future__ import annotations

import numpy as np
import pytest

from ansforge.hdl.common import DecodeStatus
from ansforge.hdl.cores import REGISTRY, core_build
from ansforge.sim.amaranth_sim import AmaranthEngine
from ansforge.sim.formal.contract import CLAUSES, CoreContract, progress_bound, role_of
from ansforge.sim.formal.mutants import MUTANTS, NotInHarness, mutated
from ansforge.sim.streams import pack, payload_shape, unpack
from ..support import queued_job, reset_mid_command

#: Every registered build at the codec it ships for (its default: the container's default format, or an
#: interleaved row's own ``N``) and each base build at the paper's one-state codec: ``(build, codec)``.
BUILDS = list(dict.fromkeys([(r.base, r.default_codec) for r in REGISTRY]
                            + [(r.name, r.paper) for r in REGISTRY if r.base == r.name]))
DECODERS = [(b, c) for b, c in BUILDS if b.endswith("decoder")]


def _ids(builds):
    return [f"{b}-{c}" for b, c in builds]


@pytest.mark.parametrize("build, codec", BUILDS, ids=_ids(BUILDS))
def test_back_to_back_commands_under_back_pressure(build, codec):
    """Commands of 0, 1 and 37 pairs (fewer and more than the interleaved builds' ``N``), queued back to back, inputs and outputs stalling at random, on
    the paper's configuration (8 extra bits, every code its own symbol) and on a table with an escape
    symbol (more extra bits): every clause holds and the run is bit-exact with an OK status per command."""
    for pairs, seed, paper in ((37, 1, True), (1, 2, False), (0, 3, True), (37, 5, False)):
        job = queued_job(build, commands=3, pairs=pairs, seed=seed, programmable=True, codec=codec, paper=paper)
        res = AmaranthEngine().run(job, stall_prob=0.3, seed=seed)
        ok, errs = job.check(res)
        assert ok, (pairs, errs)


@pytest.mark.parametrize("build, codec", BUILDS, ids=_ids(BUILDS))
@pytest.mark.parametrize("hold_output", [False, True])
def test_a_reset_mid_command_keeps_the_contract_and_the_table(build, codec, hold_output):
    """Reset in the middle of a command with the next one queued (with ``hold_output``, while the core
    holds an output nobody took): the contract holds through the reset (nothing comes out after it
    until a command; no ``done`` for the dropped ones), the table survives, and the command given
    again codes bit-exact."""
    job = queued_job(build, commands=2, pairs=30, seed=4, programmable=True, codec=codec)
    seen = reset_mid_command(job, job.per_command_inputs[0], 12, hold_output=hold_output)
    assert seen["dones"] == [1], seen["dones"]
    second = [v for p, v in seen["got"] if p == 1]
    assert np.array_equal(np.array(second, dtype=np.uint64), job.expected[job.per_command_outputs[0]:])


def _corrupted(job, rng, *, middle_only: bool = True):
    """``job`` (three decoder commands) with the middle command's words corrupted: flipped bits, words
    appended (trailing data) or dropped from the bottom (the stream ends early), its ``words`` changed to
    match. A port of two stream words has only its bits flipped (its word count's parity is its format)."""
    core = job.core
    shape = payload_shape(core, "cmd")
    per_port = max(1, len(core.i.p.data) // core.codec.word_bits)
    cuts = np.cumsum([0] + job.per_command_inputs)
    parts = [job.inputs[cuts[k]:cuts[k + 1]].copy() for k in range(len(job.commands))]
    commands = list(job.commands)
    mode = "flip" if per_port > 1 else str(rng.choice(["flip", "append", "truncate"]))
    w = parts[1].copy()
    data_bits = len(core.i.p.data)
    if mode == "flip" or w.size < 3:
        for _ in range(3):
            w[rng.integers(w.size)] ^= np.uint64(1 << int(rng.integers(data_bits)))
    elif mode == "append":
        w = np.concatenate([w, rng.integers(1, 1 << min(data_bits, 62), size=2, dtype=np.uint64)])
    else:
        w = w[:-2]
    cmd = unpack(shape, commands[1])
    cmd["words"] += (int(w.size) - len(parts[1])) * per_port
    commands[1] = pack(shape, cmd)
    parts[1] = w
    job.commands = commands
    job.inputs = np.concatenate(parts)
    return mode


@pytest.mark.parametrize("build, codec", DECODERS, ids=_ids(DECODERS))
def test_a_corrupt_command_ends_early_within_the_contract(build, codec):
    """A corrupted command between two clean ones: it may end with fewer pairs (only with an error
    status, the contract's early end), it reads exactly its words, and the clean command after it
    decodes bit-exact with OK (the decoder drained the bad one)."""
    rng = np.random.default_rng(len(build) + len(codec))
    for trial in range(2):
        job = queued_job(build, commands=3, pairs=40, seed=10 + trial, programmable=True, codec=codec)
        mode = _corrupted(job, rng)
        res = AmaranthEngine().run(job, stall_prob=0.2, seed=trial)
        assert len(res.statuses) == 3 and res.statuses[0] == res.statuses[2] == DecodeStatus.OK.value, \
            (mode, res.statuses)
        got = np.asarray(res.outputs, dtype=np.uint64)
        n0, n2 = job.per_command_outputs[0], job.per_command_outputs[2]
        assert np.array_equal(got[:n0], job.expected[:n0]) and np.array_equal(got[-n2:], job.expected[-n2:]), mode


def test_the_contract_names_its_clauses_and_refuses_what_it_is_not():
    job = queued_job("tans-decoder", commands=1, pairs=4, codec="tans8x16")
    assert job.check(AmaranthEngine().run(job))[0]
    assert role_of(job.core) == "decoder" and progress_bound(job.core) == 6 + 16
    assert CLAUSES == ("stream_rules", "out_of_reset", "commands", "progress")
    with pytest.raises(ValueError, match="clauses"):
        CoreContract(job.core, clauses=("stream_rules", "round_trip"))
    with pytest.raises(ValueError, match="role"):
        CoreContract(object())
    with pytest.raises(ValueError, match="depth"):
        CoreContract(job.core, depth=3)


# -- the mutant catalogue at the shipped datapath -------------------------------------------------------


def _shipped_codec(mutant: str) -> tuple[str, str]:
    """The build and codec a mutant's datapath ships in: a one-state harness's at the paper's codec, an
    interleaved one's at the default container format (``tans8x16``, ``rans16x16``)."""
    row = core_build(MUTANTS[mutant].core)
    base = core_build(row.base)
    return row.base, (base.paper if row.formal.states == 1 else base.default_codec)


def _caught(run) -> str | None:
    """What caught a mutant's run: a contract clause (its message), a hang, or ``None``."""
    try:
        return run()
    except AssertionError as e:
        return f"contract: {e}"
    except TimeoutError:
        return "hang"


def _outcome(job, core, scenario: str, seed: int):
    job.core = core
    if scenario.startswith("reset"):
        seen = reset_mid_command(job, job.per_command_inputs[0], 12, hold_output=scenario == "reset_held")
        return (scenario, seen["dones"], seen["status"], [v for p, v in seen["got"] if p == 1])
    res = AmaranthEngine().run(job, stall_prob=0.3, seed=seed)
    return (scenario, np.asarray(res.outputs, dtype=np.uint64).tolist(), res.statuses)


_REFERENCE: dict = {}

#: The mutants random stimulus does not reach, and why: each weakens the decoder's end check or its
#: renormalization only for a state a corrupted stream hits with odds of 2**-R to 2**-W (a final state
#: that differs from the encoder's in its top bit or in bits above the word; a state exactly
#: ``2**(S - W)``; an interleaved decoder's stream whose last lane ends at zero while another does not,
#: where the rest of the end check, the unread bits, has not already failed it). The formal ``detection`` property, which searches every stream of its bound, catches
#: each (``ansforge prove --mutants``).
#: A block's fault that the shipped core cannot reach: the tANS decoder shell gives a command's first word
#: a clock after the command (8f0d202), so no word ever arrives in the clock of the bit window's clear;
#: the window's own lemma (``window_queue``) catches it on the window alone.
UNREACHABLE_IN_THE_CORE = {"tans_dec_window_clear"}
FORMAL_ONLY = {"tans_dec_state_msb", "rans_dec_state_low", "rans_dec_renorm",
               "tans_xn_dec_one_lane_end"} | UNREACHABLE_IN_THE_CORE


def test_the_mutants_left_to_the_solver_are_the_detection_ones_and_the_unreachable():
    assert FORMAL_ONLY == {name for name, m in MUTANTS.items() if m.expected == "detection"} | UNREACHABLE_IN_THE_CORE
    # (each unreachable one is a block's fault its block-level lemma is meant to catch)
    assert {MUTANTS[name].expected for name in UNREACHABLE_IN_THE_CORE} == {"window_queue"}


# A clause that fails ends the simulation with its testbenches mid-wait; the coroutines Amaranth then
# closes report "asynchronous generator is already running" as an unraisable exception.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
# Where the unmutated core's outcome is already known, its freshly built twin is never elaborated.
@pytest.mark.filterwarnings("ignore::amaranth.hdl.UnusedElaboratable")
@pytest.mark.parametrize("mutant", sorted(set(MUTANTS) - FORMAL_ONLY))
def test_every_mutant_is_caught_in_simulation_at_the_shipped_datapath(mutant):
    """Each mutant of the catalogue (``sim/formal/mutants.py``: the netlist edits ``ansforge prove
    --mutants`` catches on the small builds) applied to its block in the build a user gets, at the paper's
    configuration and with an escape symbol: the contract fires, the run hangs, or it differs from the
    unmutated core on the same stimulus (commands back to back under back-pressure, a reset mid-command,
    one while an output is held, corrupted streams for a decoder)."""
    build, codec = _shipped_codec(mutant)
    decoder = build.endswith("decoder")
    scenarios = [("commands", 30), ("commands", 1), ("reset", 30), ("reset_held", 30)] + \
        ([("corrupt", 40)] * 4 if decoder else [])
    held = 0
    for paper in (True, False):
        for k, (scenario, pairs) in enumerate(scenarios):
            job = queued_job(build, commands=2 if scenario.startswith("reset") else 3, pairs=pairs, seed=20 + k,
                             programmable=True, codec=codec, paper=paper)
            if scenario == "corrupt":
                _corrupted(job, np.random.default_rng([7, k, paper]))
            shipped = job.core
            key = (build, codec, paper, k)
            if key not in _REFERENCE:           # the unmutated core's outcome, shared by its mutants
                _REFERENCE[key] = _outcome(job, shipped, scenario, k)
            reference = _REFERENCE[key]
            twin = mutated(shipped, mutant)
            try:
                found = _caught(lambda: None if _outcome(job, twin, scenario, k) == reference
                                else "differs from the shipped core")
            except NotInHarness:            # this configuration does not build the mutant's block
                break
            held += 1
            if found:
                return
    assert held, f"mutant {mutant}: neither configuration of {build} ({codec}) builds its block"
    pytest.fail(f"mutant {mutant} ({build}, {codec}) survived every scenario")
