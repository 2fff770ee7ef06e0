"""The report verbs, each an analysis of a checkpoint printed (and written as JSON or an image):
``figure histogram`` and ``figure quant-histogram`` (Fig. 1, Fig. 5), ``quant-table`` (Table 2),
``types``, ``outliers``, ``context``, ``activations`` and ``histograms`` (the demo's input)."""

from __future__ import annotations

import argparse

from .common import (UsageError, alias, group, number_list, refuse, report, spelled, threads, verb, write_image,
                     write_json)

group("figure", __name__, help="draw one of the paper's figures", description="Draw a figure of the paper from a checkpoint.",
      dest="figure", metavar="FIGURE")


# --- figure histogram, figure quant-histogram -----------------------------------------------------------


def _histogram_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, metavar="PATH", help="checkpoint")
    p.add_argument("--matrix", default=None, metavar="NAME", help="tensor name (default: layer 0's query projection)")
    p.add_argument("-o", "--output", required=True, metavar="F.png", help="image to write")
    p.add_argument("--pairs", default="bf16", choices=["bf16", "fp16", "fp32"], help="value format (default bf16)")


@verb("histogram", _histogram_arguments, under="figure",
      help="Fig. 1 (value histogram) next to the exponent histogram",
      description="Fig. 1: histogram of one matrix's weight values, next to the histogram of its "
                  "exponents (the codes of its coding pairs).",
      force="replace an existing image", json="also write what was drawn as JSON", outputs={"output": "file"})
def figure_histogram(args: argparse.Namespace) -> int:
    from ..analysis.figures import plot_histogram

    info = write_image(args, args.output, lambda png: plot_histogram(args.model, args.matrix, png, pairs=args.pairs))
    write_json(args, args.json, {"verb": "figure histogram", "model": args.model, "output": args.output,
                                 "matrix": args.matrix, "pairs": args.pairs,
                                 **(info if isinstance(info, dict) else {})})
    print(f"wrote {args.output}")
    return 0


def _quant_histogram_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, metavar="PATH", help="checkpoint")
    p.add_argument("--matrix", default=None, metavar="NAME", help="tensor name (default: layer 0's query projection)")
    p.add_argument("--nb", type=int, default=11, metavar="NB", help="magnitude bits (default 11, the paper's)")
    p.add_argument("-o", "--output", required=True, metavar="F.png", help="image to write")


@verb("quant-histogram", _quant_histogram_arguments, under="figure",
      help="Fig. 5 (one matrix linearly quantized to Nb bits)",
      description="Fig. 5: histogram of one matrix quantized per matrix to Nb bits plus sign, "
                  "with the NZ-MSB code boundaries (Fig. 6) marked.",
      force="replace an existing image", json="also write what was drawn as JSON", outputs={"output": "file"})
def figure_quant_histogram(args: argparse.Namespace) -> int:
    from ..analysis.table2 import plot_quant_histogram

    if not 1 <= args.nb <= 30:
        raise UsageError(f"--nb must be between 1 and 30, not {args.nb}")
    info = write_image(args, args.output, lambda png: plot_quant_histogram(args.model, png, args.matrix, args.nb))
    write_json(args, args.json, {"verb": "figure quant-histogram", "model": args.model, "output": args.output,
                                 **info})
    print(f"wrote {args.output}: {info['matrix']} at Nb = {info['nb']}, {info['bits_per_weight']:.3f} bits/weight")
    return 0


# --- quant-table ----------------------------------------------------------------------------------------


def _check_steps(steps: int | None) -> None:
    if steps is not None and steps < 0:
        raise UsageError(f"--steps must be 0 or more, not {steps}")


def _quant_table_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, metavar="PATH", help="checkpoint")
    p.add_argument("--nb", default="6,7,8,9,10,11", metavar="LIST", help="comma-separated Nb (default 6..11)")
    p.add_argument("--variants-nb", type=int, default=11, metavar="NB",
                   help="Nb of the §3.3 saturation and subdivision rows (default 11; 0 for none)")
    p.add_argument("--subdivide", default="1,2,3", metavar="LIST",
                   help="interval subdivisions: s extra bits of each NZ-MSB interval in the code (2**s codes per "
                        "interval), comma-separated (default 1,2,3)")
    p.add_argument("--saturate-bits", default="8", metavar="LIST",
                   help="additional data saturated to these widths (the paper's 'kind of saturation'; default 8)")
    p.add_argument("--clip", default="0.5,0.25", metavar="LIST",
                   help="clip each matrix at these fractions of its max|w| before quantizing (default 0.5,0.25)")
    p.add_argument("--plot", default=None, metavar="F.png", help="also draw the size/error trade-off")


@verb("quant-table", _quant_table_arguments,
      help="the paper's Table 2 (linear quantization, NZ-MSB integer pairs)",
      description="Table 2 (§3.3): per-matrix linear quantization to Nb bits plus sign, "
                  "q = rint(w / max|w| * (2**Nb - 1)), coded as NZ-MSB pairs (and direct codes); "
                  "average bits per weight for Nb = 6..11.",
      steps=True, json="also write the table as JSON", force=True, selection="values", outputs={"plot": "file"})
def quant_table(args: argparse.Namespace) -> int:
    from ..analysis.table2 import compute_table2

    try:
        nbs = tuple(int(v) for v in args.nb.split(",") if v.strip())
    except ValueError:
        raise UsageError(f"--nb must be comma-separated integers, not {args.nb!r}") from None
    if not nbs or any(not 1 <= v <= 30 for v in nbs):
        raise UsageError(f"--nb values must be between 1 and 30, not {args.nb!r}")
    sub, sat, clip = (number_list(flag, text, kind) for flag, text, kind in
                      (("--subdivide", args.subdivide, int), ("--saturate-bits", args.saturate_bits, int),
                       ("--clip", args.clip, float)))
    if not 0 <= args.variants_nb <= 16:
        raise UsageError(f"--variants-nb must be between 0 and 16, not {args.variants_nb}")
    if any(v < 1 for v in sub + sat):
        raise UsageError(f"--subdivide and --saturate-bits take widths of at least 1 bit, not "
                         f"{args.subdivide!r} / {args.saturate_bits!r}")
    if any(not 0 < c <= 1 for c in clip):
        raise UsageError(f"--clip values are fractions of max|w| in (0, 1], not {args.clip!r}")
    _check_steps(args.steps)
    table = compute_table2(args.model, nbs, args.include, args.exclude, variants_nb=args.variants_nb or None,
                           subdivide=sub, saturate_bits=sat, clips=clip, steps=args.steps)
    if args.plot:
        from ..analysis.table2 import plot_quant_tradeoff

        write_image(args, args.plot, lambda png: plot_quant_tradeoff(table, png))
    return report(table, args)


# --- types, outliers, context ---------------------------------------------------------------------------


def _types_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, metavar="PATH", help="checkpoint")
    p.add_argument("--salient", type=float, default=0.01, metavar="FRACTION",
                   help="fraction of weights kept exact as important (default 0.01)")
    p.add_argument("--importance", default="magnitude", choices=["magnitude", "activation"],
                   help="how important weights are chosen: |w| (default) or |w|·‖x‖ from calibration activations "
                        "of a llama (needs --steps)")


@verb("types", _types_arguments,
      help="size, error and effect on the model of every coding-pair data type of §3",
      description="Custom floats (E8M2, E8M3, fp8 E5M2/E4M3, fp16), posits, integers, saliency, "
                  "binary and ternary weights as coding pairs, measured on a checkpoint: bits per "
                  "weight with tables charged, relative RMSE, max relative error, shares clamped, "
                  "flushed and saturated, and on a llama the KL divergence and greedy agreement.",
      steps=True, json=True, force=True, selection="values")
def types(args: argparse.Namespace) -> int:
    from ..analysis.data_types import survey_types

    if not 0 <= args.salient <= 1:
        raise UsageError(f"--salient must be a fraction between 0 and 1, not {args.salient}")
    _check_steps(args.steps)
    return report(survey_types(args.model, salient_fraction=args.salient, importance=args.importance,
                               steps=args.steps, include=args.include, exclude=args.exclude), args)


def _outliers_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, metavar="PATH", help="checkpoint")
    p.add_argument("--nb", type=int, default=11, metavar="NB", help="magnitude bits (default 11)")
    p.add_argument("--fraction", type=float, default=0.001, metavar="F",
                   help="share of largest weights whose bits are counted (default 0.001 = 0.1%%)")
    alias(p, "--top", "fraction", type=float)
    p.add_argument("--per-matrix", action="store_true", help="list every matrix, not only the five largest ratios")


@verb("outliers", _outliers_arguments,
      help="max|w|/sigma per matrix and what the outliers cost (explains Table 2's level)",
      description="Per matrix: sigma, max|w|, their ratio, kurtosis, and the share of the NZ-MSB bits "
                  "(at Nb) spent on the top fraction of weights by |w|; the Gaussian prediction of "
                  "Table 2's level from max|w|/sigma, the ratio the paper's Table 2 implies for "
                  "Llama2-7B, and the bits when each matrix is quantized over that many sigma.",
      json=True, force=True, selection="values")
def outliers(args: argparse.Namespace) -> int:
    from ..analysis.outliers import measure_outliers

    if not 1 <= args.nb <= 30:
        raise UsageError(f"--nb must be between 1 and 30, not {args.nb}")
    if not 0 < args.fraction < 1:
        raise UsageError(f"{spelled(args, 'fraction')} must be a fraction between 0 and 1, not {args.fraction}")
    return report(measure_outliers(args.model, args.nb, args.fraction, args.include, args.exclude,
                                   per_matrix=args.per_matrix), args)


def _context_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, metavar="PATH", help="checkpoint")
    from ..model.coding.registry import DEFAULT_FORMAT, codec_help

    p.add_argument("--codec", default=DEFAULT_FORMAT, metavar="CODEC",
                   help=codec_help(DEFAULT_FORMAT, what="golden codec (any N: table sets, selects and runs work with "
                                   "interleaved states; tables built as compress --context builds them, every stored "
                                   "tANS spread charged)"))
    p.add_argument("--max-sets", type=int, default=8, metavar="SETS", help="most table sets per matrix (1..16, default 8)")
    p.add_argument("--floor", action="store_true",
                   help="instead of coding: how far each context family (one table, row groups, column "
                        "groups, row x column groups; at most --max-sets contexts) can go, as the empirical "
                        "entropy given the context (no table charged) and an adaptive coder's exact length")
    p.add_argument("--folds", default="0,1,2,3", metavar="F,F,...",
                   help="with --floor: top mantissa bits moved into the code (default 0,1,2,3)")


@verb("context", _context_arguments,
      help="context tables (several table sets per matrix) against one table per matrix",
      description="Code a checkpoint's matrices with up to SETS table sets per matrix chosen by row or "
                  "column group (and optionally the top mantissa bit folded into the code), every "
                  "table and select charged, through a real golden codec, checked bit-exactly.",
      json=True, force=True, selection="pairs")
def context(args: argparse.Namespace) -> int:
    from ..analysis.context import context_report

    if args.floor:
        refuse(args, ["codec"], "does not apply with --floor (it measures entropies, it codes nothing)")
    else:
        refuse(args, ["folds"], "applies only with --floor")
    if not 1 <= args.max_sets <= 16:
        raise UsageError(f"--max-sets must be between 1 and 16, not {args.max_sets}")
    if args.floor:
        from ..analysis.context import context_floor

        folds = number_list("--folds", args.folds)
        if not folds:
            raise UsageError("--folds needs at least one number")
        return report(context_floor(args.model, pairs=args.pairs, sets=args.max_sets, folds=folds,
                                    include=args.include, exclude=args.exclude), args)
    return report(context_report(args.model, args.codec, pairs=args.pairs, max_sets=args.max_sets,
                                 include=args.include, exclude=args.exclude), args)


# --- activations ----------------------------------------------------------------------------------------


def _activations_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, metavar="PATH", help="llama checkpoint")
    p.add_argument("--steps", type=int, default=48, metavar="N", help="tokens generated per prompt (default 48)")
    p.add_argument("--calibration", type=int, default=8, metavar="N", help="calibration prompts (default 8)")
    p.add_argument("--prompts", type=int, default=4, metavar="N", help="measured prompts (default 4)")
    p.add_argument("--runtime-codec", default="rans12", metavar="NAME", help="runtime codec (default rans12)")
    from ..model.coding.registry import PAPER

    p.add_argument("--static-codec", default=PAPER["tans"], metavar="NAME",
                   help=f"static codec (default {PAPER['tans']}, the paper's tANS)")


@verb("activations", _activations_arguments,
      help="§4.5: activations coded with runtime rANS tables or a static tANS table",
      description="Run a llama (llama2.c or HF checkpoint) on token-id prompts, record the inputs "
                  "of every weight matrix, and code them as bf16 coding pairs: per-block runtime "
                  "rANS tables (charged per block) against one static tANS table from calibration "
                  "prompts.",
      json=True, force=True, blas=True)
def activations(args: argparse.Namespace) -> int:
    from ..analysis.activations import activation_report

    from ..model.coding.codecs import parse_codec

    for name in ("steps", "calibration", "prompts"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1, not {getattr(args, name)}")
    for flag, codec in (("--runtime-codec", args.runtime_codec), ("--static-codec", args.static_codec)):
        try:
            parse_codec(codec)
        except (ValueError, ArithmeticError) as exc:
            raise UsageError(f"{flag} {codec}: {exc}") from None
    return report(activation_report(args.model, steps=args.steps, calibration=args.calibration, prompts=args.prompts,
                                    runtime_codec=args.runtime_codec, static_codec=args.static_codec), args)


# --- histograms -----------------------------------------------------------------------------------------


def _histograms_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, action="append", metavar="PATH", help="checkpoint (repeatable)")
    p.add_argument("-o", "--output", required=True, metavar="F.json", help="JSON file to write")
    p.add_argument("--threads", type=int, default=None, metavar="N",
                   help="checkpoints at a time, each in a worker process (default: one per CPU)")
    alias(p, "--jobs", "threads", type=int)


@verb("histograms", _histograms_arguments, help="measure a checkpoint's exponent histograms for `ansforge demo`",
      description="Write per-matrix exponent histograms (figures, not weights) as JSON, the format "
                  "`ansforge demo --histograms` reads and ansforge ships for its demo.",
      force="replace an existing file", json="also write a summary of what was written as JSON",
      outputs={"output": "file"})
def histograms(args: argparse.Namespace) -> int:
    from ..analysis.histograms import histograms_document

    threads(args.threads, spelled(args, "threads"))
    doc = histograms_document(args.model, jobs=args.threads)
    write_json(args, args.output, doc)
    write_json(args, args.json, {"verb": "histograms", "output": args.output, "models": [
        {"name": m.get("name"), "matrices": len(m["matrices"])} for m in doc["models"]]})
    print(f"wrote {args.output}: {sum(len(m['matrices']) for m in doc['models'])} matrices")
    return 0
