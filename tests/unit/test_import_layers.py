"""The package layers of pyproject.toml's import-linter contracts hold (``lint-imports``; docs/ARCHITECTURE.md):
posttrain imports neither rewards nor data_pipelines, and inside posttrain every subpackage imports downward."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))

pytestmark = pytest.mark.skipif(not Path(LINT_IMPORTS).exists(), reason="import-linter is not installed (dev extra)")


def _lint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LINT_IMPORTS, "--no-cache", *args], check=False, cwd=cwd, capture_output=True, text=True,
                          env={"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(cwd)}, timeout=300)


def test_the_project_keeps_its_layers() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_upward_import_breaks_the_contract(tmp_path: Path) -> None:
    """The same kind of contract fails on a lower layer importing a higher one, naming the import."""
    for package, body in (("low", "from high import core\n"), ("high", "")):
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
        (tmp_path / package / "core.py").write_text(body)
    (tmp_path / ".importlinter").write_text(textwrap.dedent("""\
        [importlinter]
        root_packages =
            low
            high

        [importlinter:contract:layers]
        name = high above low
        type = layers
        layers =
            high
            low
        """))
    result = _lint(tmp_path)
    assert result.returncode != 0
    assert "low.core -> high.core" in result.stdout
