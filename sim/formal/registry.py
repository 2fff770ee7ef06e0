"""The binding of each (core, property) to its harness, depth, solver mode and engine: which
builder makes the bench, how deep it runs by default, k-induction or bounded model checking.
"""

from __future__ import annotations

from amaranth.hdl import Fragment, Signal

from .params import (CORES, INTERLEAVED_CORES, DEFAULT_DEPTH, DETECTION_CLOCKS, LEMMA_DEPTH, STEP_DEPTH, STEP_LEMMAS, TABLE_FIRST, XN_BAKED, XN_DETECTION_CLOCKS, XN_ROUND_TRIP_CLOCKS,
                     data_table_clocks, properties_of, reset_clocks, round_trip_clocks, table_write_clocks)
from .benches import Bench
from .mutants import check_mutant, mutate
from .properties import (commands_bench, detection_bench, detection_interleaved_bench, out_of_reset_bench, progress_bench,
                         round_trip_bench, round_trip_interleaved_bench, stream_rules_bench, table_reset_bench)
from .lemmas_rans import rans_decoder_step_bench, rans_encoder_step_bench
from .lemmas_rans_xn import (rans_xn_decoder_counts_bench, rans_xn_decoder_pipeline_bench, rans_xn_decoder_step_bench, rans_xn_encoder_counts_bench, rans_xn_encoder_pipeline_bench,
                             rans_xn_encoder_step_bench)
from .lemmas_tans import decoder_counts_bench, encoder_counts_bench, packer_queue_bench, window_queue_bench
from .lemmas_tans_step import decoder_step_bench, encoder_step_bench, xn_decoder_step_bench, xn_encoder_step_bench
from .lemmas_tans_pipeline import composition_bench, decoder_pipeline_bench, encoder_pipeline_bench
_BUILDERS = {"stream_rules": stream_rules_bench, "out_of_reset": out_of_reset_bench, "progress": progress_bench}
_LEMMAS = {"composition": composition_bench, "window_queue": window_queue_bench, "packer_queue": packer_queue_bench, "encoder_counts": encoder_counts_bench, "decoder_counts": decoder_counts_bench,
           "encoder_pipeline": encoder_pipeline_bench, "decoder_pipeline": decoder_pipeline_bench}
#: The interleaved rANS builds' harnesses of a lemma that the one-state cores share a name with.
_RANS_XN_LEMMAS = {("rans-encoder-x16", "encoder_counts"): rans_xn_encoder_counts_bench,
                   ("rans-encoder-x16", "encoder_step"): rans_xn_encoder_step_bench,
                   ("rans-encoder-x16", "encoder_pipeline"): rans_xn_encoder_pipeline_bench,
                   ("rans-decoder-x5", "decoder_step"): rans_xn_decoder_step_bench,
                   ("rans-decoder-x5", "decoder_pipeline"): rans_xn_decoder_pipeline_bench,
                   ("rans-decoder-x5", "decoder_counts"): rans_xn_decoder_counts_bench}


def harness(core: str, prop: str, mutant: str | None = None, table: str = "pinned",
            depth: int | None = None) -> tuple[Fragment, Signal]:
    """The harness of ``prop`` on ``core`` as a fragment (with ``mutant``'s edits made, :func:`~.mutants.mutate`;
    ``table``, one of :data:`TABLES`, for the round trip; ``depth``, the clocks it runs for, where the
    harness depends on it: ``commands``) and its clock port."""
    b = build_bench(core, prop, mutant, table, depth)
    return mutate(Fragment.get(b.m, b.platform), mutant), b.cd.clk


def build_bench(core: str, prop: str, mutant: str | None, table: str = "pinned", depth: int | None = None) -> Bench:
    if core not in CORES:
        raise ValueError(f"core must be one of {', '.join(CORES)}, not {core!r}")
    if prop not in properties_of(core, "arbitrary"):
        raise ValueError(f"property must be one of {', '.join(properties_of(core, 'arbitrary'))} for the {core}, "
                         f"not {prop!r}")
    check_mutant(core, mutant)
    family = core.split("-")[0]
    if (core, prop) in _RANS_XN_LEMMAS:
        b = _RANS_XN_LEMMAS[core, prop](core, mutant)
    elif prop in LEMMA_DEPTH:
        b = _LEMMAS[prop](core, mutant)
    elif prop == "encoder_step" and core in INTERLEAVED_CORES:
        b = xn_encoder_step_bench(core, mutant)
    elif prop == "encoder_step":
        b = rans_encoder_step_bench(mutant) if family == "rans" else encoder_step_bench(family, mutant, table)
    elif prop == "decoder_step" and core in INTERLEAVED_CORES:
        b = xn_decoder_step_bench(core, mutant)
    elif prop == "decoder_step":
        b = rans_decoder_step_bench(mutant) if family == "rans" else decoder_step_bench(family, mutant, table)
    elif prop == "table_reset":
        b = table_reset_bench(core, mutant)
    elif prop == "commands":
        b = commands_bench(core, mutant, default_depth(core, prop, mutant, table) if depth is None else depth)
    elif prop in _BUILDERS:
        b = _BUILDERS[prop](core, mutant)
    elif prop == "round_trip" and core in INTERLEAVED_CORES:
        b = round_trip_interleaved_bench(core, mutant)
    elif prop == "round_trip":
        b = round_trip_bench(family, mutant, table)
    elif core in INTERLEAVED_CORES:
        b = detection_interleaved_bench(core, mutant)
    else:
        b = detection_bench(family, mutant, table)
    return b


def default_depth(core: str, prop: str, mutant: str | None = None, table: str = "pinned") -> int:
    """The depth a property runs at by default: :data:`DEFAULT_DEPTH` for the k-induction properties
    (plus the table's programming clocks where the harness has one), and for ``round_trip`` and
    ``detection`` the clock by which every run of the harness has finished, plus one (round trip:
    two; its table's write clocks included)."""
    family = core.split("-")[0]
    if prop in STEP_LEMMAS:
        return STEP_DEPTH[core]
    if prop in LEMMA_DEPTH:
        return LEMMA_DEPTH[prop]
    # One clock more than the scenario: a latched check (``Bench.check``) shows a violation in the
    # clock after it.
    if prop == "round_trip" and core in INTERLEAVED_CORES:
        return XN_ROUND_TRIP_CLOCKS[family] + 2
    if prop == "table_reset":
        return reset_clocks(core) + 2
    if prop == "detection" and core in INTERLEAVED_CORES:
        return XN_DETECTION_CLOCKS[family] + 2
    if prop == "round_trip":
        return data_table_clocks(family, prop, table) + round_trip_clocks(family, table) + 2
    if prop == "detection":
        return data_table_clocks(family, prop, table) + DETECTION_CLOCKS[family] + 1
    if (prop, core) in TABLE_FIRST:
        return DEFAULT_DEPTH + table_write_clocks(core)
    return DEFAULT_DEPTH


#: The SymbiYosys engine of every run (the other engines and options tried are in ``docs/formal.md``).
ENGINE = "smtbmc --nopresat z3"


def engine_of(core: str, prop: str) -> str:
    return ENGINE


def mode_of(core: str, prop: str) -> str:
    """k-induction where it closes (the stream rules of three cores, measured), else bounded model
    checking: a failed induction costs more than the base case, and for the others it fails on
    unreachable states that only the cores' insides could rule out."""
    if prop in LEMMA_DEPTH:
        return "prove"
    return "prove" if prop == "stream_rules" and core not in ("rans-encoder", *XN_BAKED) else "bmc"
