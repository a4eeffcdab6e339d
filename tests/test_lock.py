"""The lock: one constraints file that every install path uses, with torch pinned."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pins() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    rows = [line.split("==") for line in lines if line and not line.startswith("#")]
    assert all(len(row) == 2 for row in rows), "every line pins one version: name==version"
    return {name.lower(): version for name, version in rows}


def test_the_lock_pins_the_numerical_packages_and_not_psnlib():
    locked = pins()
    assert locked["torch"] == "2.13.0"  # the CPU build's public version: no local label
    assert {"transformers", "trl", "datasets", "accelerate", "numpy"} <= set(locked)
    assert "psnlib" not in locked


def test_make_ci_and_conda_install_from_the_lock():
    makefile = (ROOT / "Makefile").read_text()
    assert 'pip install -c constraints.txt -e ".[dev]"' in makefile
    assert "-c constraints.txt torch" in (ROOT / ".ci" / "run").read_text()
    assert "- -c constraints.txt" in (ROOT / "environment.yml").read_text()
