"""Every training example in examples/ runs one step through the real entry point, made small by flags.

All the YAML examples run in ONE process: ``run_entry`` starts ``posttrain/train.py`` under a small driver
(its "launcher") that loads the script and calls its ``main`` once per example, so torch, transformers and
DeepSpeed are imported once instead of once per example. The examples name embedded default models; here they run on the
session's quickly warm-started tiny models (``tiny_arithmetic``, ``tiny_diffusion``, shared with the other
end-to-end tests) so nothing else is built. What the overrides change is listed in ``small_overrides``;
every other key is the example's own.

The pipeline examples (``examples/data_*.sh``) are not rerun here: ``tests/unit/test_examples.py`` checks
that their commands parse with the data CLI's parser, and the pipelines' own end-to-end tests run the same
commands in miniature (EntropyLong and DMAP: ``tests/e2e/test_data_cli.py``; Sci2Pol bench and corpus:
``tests/e2e/test_sci2pol_cli.py``; DESIGNER, with a scripted engine: ``tests/unit/test_designer_scripted.py``
and ``tests/e2e/test_designer_resume.py``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

from posttrain.algos import get_algorithm
from posttrain.config import TrainConfig, build_config, requested_algo
from tests.e2e.conftest import REPO, run_entry

EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
PROMPTS_PER_STEP = 2

# run_entry's launcher: `python -c DRIVER posttrain/train.py ARGV.json` loads the entry-point script and calls its
# main() once per argv list in the JSON file, printing one return code per line.
DRIVER = ("import json, runpy, sys\nmain = runpy.run_path(sys.argv[1], run_name='examples')['main']\n"
          "for argv in json.load(open(sys.argv[2])):\n    print('rc', main(argv), flush=True)\n")


def example_config(path: Path) -> TrainConfig:
    """The example's resolved config, as the entry point builds it."""
    argv = ["--config", str(path)]
    return build_config(get_algorithm(requested_algo(argv)).config_class, argv)


def small_overrides(config: TrainConfig, model: Path, out: Path, dataset: Path) -> list[str]:
    """Flags that make an example with resolved ``config`` take one small step on ``model``, writing to ``out``."""
    flags = ["--model", str(model), "--output_dir", str(out), "--steps", "1", "--eval_every", "0",
             "--save_every", "0", "--prompts_per_step", str(PROMPTS_PER_STEP),
             "--micro_batch_size", str(PROMPTS_PER_STEP * config.group_size), "--report_to", "jsonl",
             "--progress", "false"]
    if config.rollout != "diffusion":  # the diffusion sampler's length L is the model's canvas: kept
        # Prefix-RL's budget is the whole answer: its adapter's k-token prefix, then 8 for the frozen target
        prefix = 0
        if hasattr(config, "prefix_length"):
            prefix = dataclasses.replace(config, model=str(model)).prefix_length()
        flags += ["--max_new_tokens", str(prefix + 8)]
    if hasattr(config, "span_oracle"):  # Text2Grad: the program's spans (tests/e2e/test_ppo.py runs the span model)
        flags += ["--span_oracle", "true"]
    if config.task == "dataset":  # the GPU template: a small file of its columns, one CPU rank in fp32
        flags += ["--dataset", str(dataset), "--precision", "fp32", "--zero_stage", "0"]
    return flags


def test_every_training_example_takes_a_step(tiny_arithmetic: Path, tiny_diffusion: Path, tmp_path: Path) -> None:
    dataset = tmp_path / "problems.jsonl"
    dataset.write_text("".join(json.dumps({"question": f"{a}+{a}=", "answer": str(2 * a)}) + "\n" for a in range(20)))
    runs = []
    for path in EXAMPLES:
        config = example_config(path)
        model = tiny_diffusion if config.rollout == "diffusion" else tiny_arithmetic
        out = tmp_path / path.stem
        runs.append((path, out, ["--config", str(path), *small_overrides(config, model, out, dataset)]))
    argv_file = tmp_path / "argv.json"
    argv_file.write_text(json.dumps([argv for _, _, argv in runs]))
    result = run_entry([str(argv_file)], launcher=[sys.executable, "-c", DRIVER])
    codes = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("rc ")]
    assert result.returncode == 0 and codes == ["0"] * len(runs), result.stdout[-3000:] + result.stderr[-5000:]
    for path, out, _ in runs:
        rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
        assert rows and rows[-1]["step"] == 1, path.name
        assert math.isfinite(rows[-1]["train/loss"]), (path.name, rows[-1])
        assert (out / "checkpoints" / "step_1" / "COMPLETE").exists(), path.name

