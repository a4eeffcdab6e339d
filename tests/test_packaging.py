"""pyproject.toml: the Python TRL needs, and a ``gpu`` extra whose pins resolve together."""

import importlib.metadata
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

PYPROJECT = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())


def test_python_is_what_trl_needs():
    trl = importlib.metadata.metadata("trl")["Requires-Python"]  # TRL 1.16: >=3.11
    assert SpecifierSet(PYPROJECT["project"]["requires-python"]) == SpecifierSet(trl)
    assert PYPROJECT["tool"]["ruff"]["target-version"] == "py311"


def test_gpu_extra_pins_fit_trl_and_vllm():
    pins = {}
    for line in PYPROJECT["project"]["optional-dependencies"]["gpu"]:
        requirement = Requirement(line)
        pins[requirement.name] = requirement
    assert {"trl", "vllm", "torch", "transformers"} <= set(pins)
    assert "vllm" in pins["trl"].extras
    # the vLLM pin is one TRL's own vllm extra allows (TRL 1.16: >=0.22.0, <=0.31.0)
    (trl_vllm,) = [
        Requirement(r)
        for r in importlib.metadata.requires("trl")
        if r.startswith("vllm") and 'extra == "vllm"' in r
    ]
    (vllm_version,) = [s.version for s in pins["vllm"].specifier if s.operator == "=="]
    assert trl_vllm.specifier.contains(vllm_version)
    # vLLM 0.31.0 pins torch 2.13.0 and needs transformers >= 5.10.4, < 5.18
    assert vllm_version == "0.31.0" and str(pins["torch"].specifier) == "==2.13.0"
    transformers = pins["transformers"].specifier
    assert transformers.contains("5.17.0") and not transformers.contains("5.18.0")
    assert not transformers.contains("5.10.3")
