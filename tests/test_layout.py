"""The library and its wing: ``import psnlib`` and a ``PSNGRPOTrainer`` load no module of the
replication wing nor of the notebook stack, the install keeps them apart, and the layering is a
contract that import-linter checks (``make test``) and that fails on an import into the wing, or
on an import of the compute layer or the trainer by the analysis or the report (records one
way)."""

import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
WING = ("psnlib.replication", "papermill", "nbformat", "jupyter", "seaborn", "matplotlib")


def test_the_library_loads_no_wing_module_even_when_they_cannot_be_imported(tmp_path):
    """In a fresh interpreter where the wing and the notebook stack cannot be imported at all,
    ``import psnlib`` and building a ``PSNGRPOTrainer`` on a tiny model still work, and no such
    module is loaded."""
    script = textwrap.dedent(
        f"""
        import sys
        from importlib.abc import MetaPathFinder

        WING = {WING!r}

        class Blocked(MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.startswith(WING):
                    raise ImportError(f"blocked: {{name}}")

        sys.meta_path.insert(0, Blocked())
        import psnlib
        from datasets import Dataset

        from psnlib.models import build_tokenizer, tiny_policy

        tokenizer = build_tokenizer()
        psnlib.PSNGRPOTrainer(
            model=tiny_policy(size="smoke", tokenizer=tokenizer),
            reward_funcs=psnlib.countdown_reward,
            args=psnlib.PSNGRPOConfig(
                output_dir={str(tmp_path)!r}, per_device_train_batch_size=8, num_generations=4,
                max_completion_length=8, max_steps=1, report_to="none", use_cpu=True,
                bf16=False, gradient_checkpointing=False,
            ),
            train_dataset=Dataset.from_dict(
                {{"prompt": ["1 2->3:"] * 8, "numbers": [[1, 2]] * 8, "target": [3] * 8}}
            ),
            processing_class=tokenizer,
        )
        print(sorted(m for m in sys.modules if m.startswith(WING)))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_the_public_api_is_the_method():
    import psnlib

    assert 20 <= len(psnlib.__all__) <= 30
    assert all(hasattr(psnlib, name) for name in psnlib.__all__)
    for harness in ("train_policy", "fit", "compare", "Variant", "PROFILES", "get_profile"):
        assert not hasattr(psnlib, harness), harness


def test_core_dependencies_are_the_librarys_and_the_wing_is_an_extra():
    core = {Requirement(r).name for r in PYPROJECT["project"]["dependencies"]}
    extras = PYPROJECT["project"]["optional-dependencies"]
    stack = {"papermill", "jupyterlab", "ipywidgets", "seaborn", "matplotlib", "nbformat"}
    assert not core & stack
    assert stack <= {Requirement(r).name for r in extras["replication"]}
    assert "psnlib[replication]" in extras["dev"]  # make test and .ci/run install it
    (trl,) = [Requirement(r) for r in PYPROJECT["project"]["dependencies"] if r.startswith("trl")]
    assert trl.specifier.contains("1.16.0") and not trl.specifier.contains("1.17.0")


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` with the project's contracts on the ``psnlib`` package under ``root``."""
    lint = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(lint), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
        env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
    )


@pytest.fixture
def package_copy(tmp_path):
    shutil.copytree(
        ROOT / "psnlib", tmp_path / "psnlib", ignore=shutil.ignore_patterns("__pycache__")
    )
    return tmp_path


def test_the_contracts_hold_on_the_package(package_copy):
    done = lint_imports(package_copy)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "5 kept, 0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        (
            "noise.py",
            "import psnlib.replication.plan.profiles",
            "does not import the replication wing",
        ),
        ("tis.py", "from psnlib.trainer import PSNGRPOTrainer", "Layers"),
        ("tasks/countdown.py", "import psnlib.tasks.splits", "No import cycle"),
        (
            "replication/analysis/claim.py",
            "from psnlib.replication.compute.runs import train_policy",
            "one way",
        ),
        ("replication/report/results.py", "from psnlib.replication.compute import jobs", "one way"),
        ("replication/analysis/summaries.py", "import psnlib.trainer", "one way"),
        # the rooms: each imports only the rooms below it; analysis and compute are independent
        ("replication/plan/arms.py", "from psnlib.replication.records import ledger", "rooms"),
        ("replication/records/ledger.py", "import psnlib.replication.compute.jobs", "rooms"),
        ("replication/compute/jobs.py", "import psnlib.replication.analysis.frontier", "rooms"),
        ("replication/analysis/verdicts.py", "import psnlib.replication.report.plots", "rooms"),
    ],
)
def test_lint_imports_fails_on_an_import_against_the_layout(package_copy, module, line, broken):
    path = package_copy / "psnlib" / module
    path.write_text(path.read_text() + f"\n{line}  # against the layout\n")
    done = lint_imports(package_copy)
    assert done.returncode == 1, done.stdout[-3000:]
    assert f"{broken}" in done.stdout and "BROKEN" in done.stdout
