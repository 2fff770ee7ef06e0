"""``ansforge factory``: the token-factory bandwidth model (§4.7, Fig. 13)."""

from __future__ import annotations

import argparse

from .common import UsageError, refuse, verb, write_image, write_json


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--params", type=float, default=7e9, help="weights of the model (default 7e9)")
    p.add_argument("--bytes-per-weight", type=float, default=2.0, help="raw bytes per weight (default 2, bf16)")
    p.add_argument("--ratio", type=float, default=None,
                   help="compressed size / raw size (default 0.66, the paper's; or measured with --model)")
    p.add_argument("--model", default=None, metavar="PATH",
                   help="measure the ratio on this checkpoint, as `ansforge tables` does")
    from ..model.coding.registry import DEFAULT_FORMAT, codec_help

    p.add_argument("--codec", default=DEFAULT_FORMAT, metavar="CODEC",
                   help=codec_help(DEFAULT_FORMAT, what="with --model, the codec whose ratio is measured"))
    p.add_argument("--processors", type=int, default=10, help="N, processors in lockstep (default 10)")
    p.add_argument("--tokens-per-s", type=float, default=10.0, help="tokens/s of each processor (default 10)")
    p.add_argument("--clock-mhz", type=float, default=500.0, help="decompressor clock (default 500 MHz)")
    p.add_argument("--pairs-per-clock", type=float, default=1.0, help="pairs per clock of one lane (default 1)")
    p.add_argument("--plot", default=None, metavar="F.png", help="also draw bandwidth against N and against the ratio")


@verb("factory", _arguments, help="token-factory bandwidth model (§4.7, Fig. 13)",
      description="DRAM bandwidth for N LLM processors in lockstep fed by one shared weight "
                  "decompressor, with and without sharing and compression; decoder lanes needed. "
                  "Defaults: the paper's example (Llama2-7B bf16, ratio 0.66, 10 x 10 tokens/s).",
      json=True, force=True, outputs={"plot": "file"})
def factory(args: argparse.Namespace) -> int:
    from ..analysis.factory import FactoryModel, factory_ratio, plot_factory

    if args.model is not None and args.ratio is not None:
        raise UsageError("give --ratio or --model, not both")
    if args.model is None:
        refuse(args, ["codec"], "applies only with --model (the codec measured on it)")

    def model(ratio: float) -> FactoryModel:
        return FactoryModel(params=args.params, bytes_per_weight=args.bytes_per_weight, ratio=ratio,
                            processors=args.processors, tokens_per_s=args.tokens_per_s,
                            clock_hz=args.clock_mhz * 1e6, pairs_per_clock=args.pairs_per_clock)

    model(args.ratio if args.ratio is not None else 0.66)      # every figure checked before --model is read
    if args.model is not None:
        from ..model.coding.codecs import parse_codec

        try:
            parse_codec(args.codec)
        except (ValueError, ArithmeticError) as exc:
            raise UsageError(f"--codec {args.codec}: {exc}") from None
    ratio, source = factory_ratio(args.ratio, args.model, args.codec)
    fm = model(ratio)
    print(fm.format_text(source))
    write_json(args, args.json, {**fm.summary(), "ratio_source": source})
    if args.plot:
        write_image(args, args.plot, lambda png: plot_factory(fm, png))
        print(f"wrote {args.plot}")
    return 0
