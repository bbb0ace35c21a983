"""``posttrain data <pipeline> ...``: the data pipelines' command line (``data_main(argv) -> int``)."""

from __future__ import annotations

import argparse

from posttrain.cli_help import HelpFormatter


def build_parser() -> argparse.ArgumentParser:
    from data_pipelines.dmap.pipeline import add_dmap_args
    from data_pipelines.entropylong.run import add_entropylong_args

    parser = argparse.ArgumentParser(prog="posttrain data", description="Synthetic data pipelines and analysis.",
                                     formatter_class=HelpFormatter)
    sub = parser.add_subparsers(dest="pipeline", required=True, metavar="PIPELINE")
    el = sub.add_parser("entropylong", help="EntropyLong: long-context sequences verified by entropy reduction",
                        formatter_class=HelpFormatter,
                        description="EntropyLong (Jia et al. 2026). With no --input/--model: runs on the built-in "
                        "synthetic corpus scored by smollm2-135m and reports precision/recall.")
    add_entropylong_args(el)
    dm = sub.add_parser("dmap", help="DMAP: distribution map of texts under a model (+ chi-square uniformity)",
                        formatter_class=HelpFormatter,
                        description="DMAP (Kempton et al. 2026). With no --input: pure vs top-k vs low-temperature "
                        "samples of the embedded tiny corpus LM.")
    add_dmap_args(dm)
    from rewards.text2grad.data import add_text2grad_sft_args

    t2g = sub.add_parser("text2grad-sft", help="Text2Grad: SFT data for a span reward model (critique + spans JSON)",
                         formatter_class=HelpFormatter,
                         description="Text2Grad (Wang et al. 2025) span reward model SFT data. With no --input: "
                         "program-written feedback on step-arithmetic responses with injected step errors.")
    add_text2grad_sft_args(t2g)
    return parser


def data_main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.pipeline == "entropylong":
        from data_pipelines.entropylong.run import run_entropylong

        return run_entropylong(args)
    if args.pipeline == "text2grad-sft":
        from rewards.text2grad.data import run_text2grad_sft

        return run_text2grad_sft(args)
    from data_pipelines.dmap.pipeline import run_dmap

    return run_dmap(args)


if __name__ == "__main__":
    import sys

    raise SystemExit(data_main(sys.argv[1:]))
