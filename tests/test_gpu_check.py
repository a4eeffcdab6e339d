"""benchmarks/gpu_check.py, the GPU check of PSN-GRPO, in its CPU dry run: every check runs on
tiny fp32 Qwen2 and Qwen3 policies, so the script cannot rot before a GPU runs it."""

import importlib.util
import json
from pathlib import Path

import pytest

PATH = Path(__file__).resolve().parent.parent / "benchmarks" / "gpu_check.py"
pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_dry_run_passes_every_check_on_both_families(gpu_check, tmp_path, capsys):
    out = tmp_path / "gpu_check.json"
    assert gpu_check.main(["--dry-run", "--out", str(out)]) == 0
    results = json.loads(out.read_text())["results"]
    done = {(r["check"], r["family"], r["engine"]): r["status"] for r in results}
    for family in ("qwen2", "qwen3"):
        for engine in ("psnlib", "generate"):
            for scope in ("step", "rollout"):
                assert done[("behaviour", family, f"{engine}/{scope}")] == "PASS"
                assert done[("restore", family, f"{engine}/{scope}")] == "PASS"
            assert done[("tis", family, engine)] == "PASS"
        assert done[("sigma0", family, "generate")] == "PASS"
        assert done[("timing", family, "psnlib")] == "INFO"
        assert done[("vllm", family, "vllm")] == "SKIP"  # no vLLM, no CUDA here
    assert "0 failed" in capsys.readouterr().out


def test_a_failing_check_is_reported_and_the_run_goes_on(gpu_check, tmp_path, monkeypatch):
    def broken(self, family):
        raise RuntimeError("no kernel image")

    monkeypatch.setattr(gpu_check.Check, "sigma0", broken)
    for quick in ("behaviour_and_restore", "tis", "timing"):  # the run itself is tested above
        monkeypatch.setattr(gpu_check.Check, quick, lambda self, family, *args: None)
    out = tmp_path / "gpu_check.json"
    assert gpu_check.main(["--dry-run", "--out", str(out)]) == 1
    failed = [r for r in json.loads(out.read_text())["results"] if r["status"] == "FAIL"]
    assert [(r["check"], r["error"]) for r in failed] == [
        ("sigma0", "RuntimeError: no kernel image")
    ] * 2


def test_missing_modules_are_named_before_anything_runs(gpu_check, monkeypatch, capsys):
    monkeypatch.setitem(gpu_check.NEEDS, "no_such_module_xyz", "no-such-wheel==1.0")
    assert gpu_check.main(["--dry-run"]) == 2
    assert "no-such-wheel==1.0" in capsys.readouterr().err
