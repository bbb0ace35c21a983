"""``posttrain data <pipeline> ...``: the data pipelines' command line (``data_main(argv) -> int``)."""

from __future__ import annotations

import argparse
import sys

from posttrain.common.cli_help import CommandParser


def build_parser() -> argparse.ArgumentParser:
    from data_pipelines.dmap.pipeline import add_dmap_args
    from data_pipelines.entropylong.run import add_entropylong_args

    parser = CommandParser(prog="posttrain data", description="Synthetic data pipelines and analysis.")
    sub = parser.add_subparsers(dest="pipeline", required=True, metavar="PIPELINE")
    el = sub.add_parser("entropylong", help="EntropyLong: long-context sequences verified by entropy reduction",
                        description="EntropyLong (Jia et al. 2026). With no --input/--model: runs on the built-in "
                        "synthetic corpus scored by smollm2-135m and reports precision/recall.")
    add_entropylong_args(el)
    dm = sub.add_parser("dmap", help="DMAP: distribution map of texts under a model (+ chi-square uniformity)",
                        description="DMAP (Kempton et al. 2026). With no --input: pure vs top-k vs low-temperature "
                        "samples of the embedded tiny corpus LM.")
    add_dmap_args(dm)
    from data_pipelines.text2grad.sft import add_text2grad_sft_args

    t2g = sub.add_parser("text2grad-sft", help="Text2Grad: SFT data for a span reward model (critique + spans JSON)",
                         description="Text2Grad (Wang et al. 2025) span reward model SFT data. With no --input: "
                         "program-written feedback on step-arithmetic responses with injected step errors.")
    add_text2grad_sft_args(t2g)
    from data_pipelines.common.diversity import add_diversity_args
    from data_pipelines.designer.run import add_designer_args
    from data_pipelines.sci2pol.run import add_sci2pol_args

    des = sub.add_parser("designer", help="DESIGNER: design-logic-guided question synthesis",
                         description="DESIGNER (design-logic-guided reasoning data synthesis). With no --input: the "
                         "built-in question bank and source texts through smollm2-135m.")
    add_designer_args(des)
    div = sub.add_parser("diversity", help="Diversity metrics of a question set (pairwise cosine/L2, 1-NN, k-means)")
    add_diversity_args(div)
    s2p = sub.add_parser("sci2pol", help="Sci2Pol: the paper-to-policy-brief bench runner and corpus builder",
                         description="Sci2Pol. `bench` scores a model on the 18 tasks; `corpus` mines citation-linked "
                         "pairs. With no other argument each runs on built-in miniature inputs.")
    add_sci2pol_args(s2p)
    return parser


def data_main(argv: list[str]) -> int:
    """Run one pipeline; a stale output folder or an infrastructure failure ends it with exit code 1 and a
    one-line error naming what changed or the cause (``common.runner``)."""
    from data_pipelines.common.blocks import StageFailed, StaleOutput

    args = build_parser().parse_args(argv)
    try:
        return _run(args)
    except (StageFailed, StaleOutput) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    if args.pipeline == "entropylong":
        from data_pipelines.entropylong.run import run_entropylong

        return run_entropylong(args)
    if args.pipeline == "text2grad-sft":
        from data_pipelines.text2grad.sft import run_text2grad_sft

        return run_text2grad_sft(args)
    if args.pipeline == "designer":
        from data_pipelines.designer.run import run_designer

        return run_designer(args)
    if args.pipeline == "diversity":
        from data_pipelines.common.diversity import run_diversity

        return run_diversity(args)
    if args.pipeline == "sci2pol":
        from data_pipelines.sci2pol.run import run_sci2pol

        return run_sci2pol(args)
    from data_pipelines.dmap.pipeline import run_dmap

    return run_dmap(args)


if __name__ == "__main__":
    raise SystemExit(data_main(sys.argv[1:]))
