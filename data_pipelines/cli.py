"""``posttrain data <pipeline> ...``: the data pipelines' command line (``data_main(argv) -> int``).

``SUBCOMMANDS`` is the one list of pipelines (name -> help, description), in the order ``--help`` shows them;
``posttrain --help`` names them from it. Each pipeline parses its flags once, at its ``run_*`` function (the CLI
edge), into its typed options; nothing below that sees argparse.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from posttrain.common.cli_help import CommandParser

SUBCOMMANDS: dict[str, tuple[str, str | None]] = {
    "entropylong": ("EntropyLong: long-context sequences verified by entropy reduction",
                    ("EntropyLong (Jia et al. 2026). With no --input/--model: runs on the built-in synthetic corpus "
                     "scored by smollm2-135m and reports precision/recall.")),
    "dmap": ("DMAP: distribution map of texts under a model (+ chi-square uniformity)",
             ("DMAP (Kempton et al. 2026). With no --input: pure vs top-k vs low-temperature samples of the embedded "
              "tiny corpus LM.")),
    "text2grad-sft": ("Text2Grad: SFT data for a span reward model (critique + spans JSON)",
                      ("Text2Grad (Wang et al. 2025) span reward model SFT data. With no --input: program-written "
                       "feedback on step-arithmetic responses with injected step errors.")),
    "designer": ("DESIGNER: design-logic-guided question synthesis",
                 ("DESIGNER (design-logic-guided reasoning data synthesis). With no --input: the built-in question "
                  "bank and source texts through smollm2-135m.")),
    "diversity": ("Diversity metrics of a question set (pairwise cosine/L2, 1-NN, k-means)", None),
    "sci2pol": ("Sci2Pol: the paper-to-policy-brief bench runner and corpus builder",
                ("Sci2Pol. `bench` scores a model on the 18 tasks; `corpus` mines citation-linked pairs. With no "
                 "other argument each runs on built-in miniature inputs.")),
}
"""Every ``posttrain data`` pipeline: name -> (one-line help, description of its ``--help``)."""

ArgsAdder = Callable[[argparse.ArgumentParser], None]
Runner = Callable[[argparse.Namespace], int]


def _pipelines() -> dict[str, tuple[ArgsAdder, Runner]]:
    """Each pipeline's flags and its run (imported here, not at the top: ``posttrain --help`` reads
    ``SUBCOMMANDS`` without loading the pipelines)."""
    from data_pipelines.common.diversity import add_diversity_args, run_diversity
    from data_pipelines.designer.options import add_designer_args
    from data_pipelines.designer.run import run_designer
    from data_pipelines.dmap.options import add_dmap_args
    from data_pipelines.dmap.pipeline import run_dmap
    from data_pipelines.entropylong.options import add_entropylong_args
    from data_pipelines.entropylong.run import run_entropylong
    from data_pipelines.sci2pol.options import add_sci2pol_args
    from data_pipelines.sci2pol.run import run_sci2pol
    from data_pipelines.text2grad.sft import add_text2grad_sft_args, run_text2grad_sft

    return {"entropylong": (add_entropylong_args, run_entropylong), "dmap": (add_dmap_args, run_dmap),
            "text2grad-sft": (add_text2grad_sft_args, run_text2grad_sft),
            "designer": (add_designer_args, run_designer), "diversity": (add_diversity_args, run_diversity),
            "sci2pol": (add_sci2pol_args, run_sci2pol)}


def build_parser() -> argparse.ArgumentParser:
    pipelines = _pipelines()
    parser = CommandParser(prog="posttrain data", description="Synthetic data pipelines and analysis.")
    sub = parser.add_subparsers(dest="pipeline", required=True, metavar="PIPELINE")
    for name, (help_line, description) in SUBCOMMANDS.items():
        add_args, _ = pipelines[name]
        add_args(sub.add_parser(name, help=help_line, **({"description": description} if description else {})))
    return parser


def data_main(argv: list[str]) -> int:
    """Run one pipeline; a stale output folder or an infrastructure failure ends it with exit code 1 and a
    one-line error naming what changed or the cause (``common.runner``)."""
    from data_pipelines.common.blocks import StageFailed, StaleOutput

    args = build_parser().parse_args(argv)
    _, run = _pipelines()[args.pipeline]
    try:
        return run(args)
    except (StageFailed, StaleOutput) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(data_main(sys.argv[1:]))
