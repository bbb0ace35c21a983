"""Write ``tests/module_seconds.json``, each test module's measured seconds (setup, call and teardown of all
its tests), from a JUnit XML report: ``bash scripts/run_tests.sh --junitxml /tmp/run.xml`` then
``python scripts/module_seconds.py /tmp/run.xml``. ``tests/conftest.py`` hands modules to the parallel test
workers longest first by these figures, so that no long module starts last; they only order the run and
never decide a result, so a stale file costs time, not correctness."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

from posttrain.common.cli_help import CommandParser

OUT = Path(__file__).resolve().parents[1] / "tests" / "module_seconds.json"


def module_seconds(report: Path) -> dict[str, float]:
    """Seconds per test module file (``tests/e2e/test_x.py``) summed over the report's test cases."""
    seconds: dict[str, float] = {}
    for case in ElementTree.parse(report).iter("testcase"):
        module = case.get("classname", "").split(".")
        path = "/".join(module[:3]) + ".py"
        seconds[path] = seconds.get(path, 0.0) + float(case.get("time", 0.0))
    return {path: round(value, 1) for path, value in sorted(seconds.items(), key=lambda kv: -kv[1])}


def main() -> None:
    parser = CommandParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", type=Path, help="a JUnit XML report of a whole run (pytest --junitxml)")
    args = parser.parse_args()
    OUT.write_text(json.dumps(module_seconds(args.report), indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
