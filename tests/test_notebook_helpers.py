"""psnlib.replication.report.notebook: an unknown notebook parameter is an error naming it (on
hand-made namespaces, and through papermill before any work), and the papers' numbers beside
ours."""

import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from psnlib.replication.analysis.claims import CLAIMS
from psnlib.replication.plan import experiments
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.report import notebook

PARAMETERS_CELL = '# Parameters\nprofile = "cpu"  # smoke | cpu\nseeds = None\nfigures_dir = None'
SETUP_CELL = "from psnlib import notebook\n\nnotebook.check_parameters(globals())"


def test_unknown_names_are_named_with_the_known_ones():
    namespace = {"profile": "smoke", "profil": "smoke", "seeds": None, "metrics_path": None}
    with pytest.raises(ValueError) as error:
        notebook.check_parameters(namespace)
    assert str(error.value) == (
        "unknown notebook parameter(s) profil; known: profile, seeds, figures_dir, metrics_path"
    )
    notebook.check_parameters({"profile": "smoke", "seeds": (0,)})  # all known: no error
    with pytest.raises(ValueError, match=r"parameter\(s\) seeds; known: profile$"):
        notebook.check_parameters({"profile": "smoke", "seeds": (0,)}, known=("profile",))


def test_modules_functions_classes_and_private_names_are_not_parameters():
    namespace = {
        "profile": "smoke",
        "np": np,  # an import
        "check": notebook.check_parameters,  # an imported function
        "DataFrame": pd.DataFrame,  # a class
        "_": 3,  # IPython's last result
        "In": [],  # IPython's history, empty: no cell has run
        "Out": {},
        "get_ipython": print,
    }
    notebook.check_parameters(namespace)
    with pytest.raises(ValueError, match="parameter\\(s\\) sedes;"):
        notebook.check_parameters(namespace | {"sedes": (0, 1)})


def test_in_ipython_only_the_parameter_cells_count():
    """Papermill runs the parameters cell, then the cell it injects, then the check; a notebook
    re-run in a used kernel keeps its old variables, which are not parameters."""
    injected = '# Parameters\nprofil = "smoke"\nfigures_dir = "/tmp/f"\n'
    papermill = {"In": ["", PARAMETERS_CELL, injected, SETUP_CELL], "profil": "smoke"}
    with pytest.raises(ValueError, match=r"parameter\(s\) profil; known"):
        notebook.check_parameters(papermill)
    leftovers = {"P": object(), "KS": (1, 4, 16), "seed": 0, "metrics": {"a": 1.0}}
    previous_run = ["r = experiment.run(seeds)", 'metrics = {"pass": summaries.passk(r)}']
    rerun = ["", PARAMETERS_CELL, SETUP_CELL, *previous_run, PARAMETERS_CELL, SETUP_CELL]
    notebook.check_parameters({"In": rerun, **leftovers})  # the leftovers are not parameters
    typo = rerun[:-2] + ['profile = "smoke"\nsedes = (0,)', SETUP_CELL]
    with pytest.raises(ValueError, match=r"parameter\(s\) sedes; known"):
        notebook.check_parameters({"In": typo, **leftovers})


IMPORTS_CELL = "from psnlib.replication import notebook, plots\nimport math  # a comment"
CHECK_CELL = "notebook.check_parameters(globals())  # an unknown parameter fails here"


@pytest.mark.parametrize(
    ("between", "by_hand"),
    [
        ([IMPORTS_CELL], ["profile", "sedes"]),  # 01b's order until issue 39
        ([IMPORTS_CELL, "# only a comment", IMPORTS_CELL], ["profile", "sedes"]),
        ([IMPORTS_CELL, "P = get_profile(profile)\nout = f(P)", "KS = (1, 4)"], ["KS"]),
        (["x = f(1)", IMPORTS_CELL], []),
    ],
    ids=["imports", "imports and comments", "work then literals", "work"],
)
def test_cells_between_the_parameters_and_the_check_hide_no_parameter(between, by_hand):
    """Papermill's injected cell (``# Parameters`` first) is found wherever the check stands
    after it. Without that line, the cells of literals right before the check count, cells of
    imports between them and the check skipped; none after work (a used kernel's leftovers)."""
    injected = "# Parameters\nprofile = 'smoke'\nsedes = 1\n"
    history = ["", PARAMETERS_CELL, injected, *between, CHECK_CELL]
    given = notebook.given_parameters({"In": history})
    assert given == ["profile", "seeds", "figures_dir", "sedes"]
    with pytest.raises(ValueError, match=r"^unknown notebook parameter\(s\) sedes; known: "):
        notebook.check_parameters({"In": history, "profile": "smoke", "sedes": 1})
    hand = ["", 'profile = "smoke"\nsedes = 1', *between, CHECK_CELL]  # no '# Parameters'
    assert notebook.given_parameters({"In": hand}) == by_hand


def test_papermills_spellings_of_its_values_and_names_are_read():
    """``-p sedes nan`` becomes ``sedes = float('nan')``: still a cell of literals, so the name
    is refused; ``--inject-paths`` adds papermill's own PAPERMILL_*_PATH: allowed; an annotated
    or unpacked parameter is a parameter too."""
    injected = "# Parameters\nsedes = float('nan')\nseeds = [float(\"-inf\"), 1]\n"
    with pytest.raises(ValueError, match=r"parameter\(s\) sedes; known"):
        notebook.check_parameters({"In": ["", PARAMETERS_CELL, injected, CHECK_CELL]})
    paths = '# Parameters\nPAPERMILL_INPUT_PATH = "a.ipynb"\nPAPERMILL_OUTPUT_PATH = "b.ipynb"\n'
    namespace = {"In": ["", PARAMETERS_CELL, paths, CHECK_CELL], "profile": "smoke"}
    notebook.check_parameters(namespace)
    hand = "profile: str = 'smoke'\nseeds, figures_dir = None, None\nfigure_dir: str = 'x'"
    assert notebook.given_parameters({"In": ["", hand, CHECK_CELL]}) == [
        *("profile", "seeds", "figures_dir", "figure_dir"),
    ]
    for not_literal in ("x = float('1.5')", "x = open('f')", "x = y", "x += 1", "x = ("):
        assert notebook.given_parameters({"In": ["", not_literal, CHECK_CELL]}) == []


@pytest.mark.parametrize(
    ("namespace", "message"),
    [
        ({"profile": 1}, r"profile must be a profile name, got 1; allowed: \['cpu', .*'smoke'\]$"),
        ({"profile": ""}, r"^notebook parameter profile: unknown profile ''; allowed: \["),
        ({"profile": math.nan}, r"got nan; allowed: "),
        ({"seeds": [2**32]}, r"seeds must be integers in \[0, 4294967295\] .*got \[4294967296\]$"),
        ({"seeds": (1, 2, 1)}, r"seeds must be distinct .*, got \(1, 2, 1\)$"),
        ({"seeds": list(range(1000)) + [2**40]}, r"got \[0, 1, 2, .* \.\.\.\]$"),
        ({"seeds": [math.nan]}, r"seeds must be None or a non-empty list .*, got \[nan\]$"),
        ({"figures_dir": ""}, r"figures_dir must be None \(the default place\) or a path, got ''"),
        ({"metrics_path": " "}, r"metrics_path must be None .* or a path, got ' ', an empty path$"),
    ],
)
def test_a_bad_value_is_one_line_naming_it_and_what_is_allowed(namespace, message):
    with pytest.raises(ValueError) as error:
        notebook.check_values(namespace)
    assert "\n" not in str(error.value) and len(str(error.value)) < 400, str(error.value)
    assert re.search(message, str(error.value)), str(error.value)
    notebook.check_values({"profile": "smoke", "seeds": [0, 2**32 - 1], "figures_dir": "f"})


@pytest.mark.notebooks
@pytest.mark.parametrize(
    ("parameter", "message"),
    [
        (["profil", "smoke"], "ValueError: unknown notebook parameter(s) profil; known: profile"),
        (["seeds", "(0, 1)"], "ValueError: notebook parameter seeds must be None or a non-empty"),
    ],
)
def test_a_bad_papermill_parameter_fails_before_any_work(tmp_path, parameter, message):
    """`papermill ... -p profil smoke` used to warn and run the default cpu profile (SFT first),
    and `-p seeds '(0, 1)'` (a string to papermill) reached the runs as characters; now the
    cell after the parameters stops both, naming the parameter. The cell timeout bounds the
    test where the check is missing (the SFT cell would run for minutes)."""
    data = tmp_path / "data"
    env = {**os.environ, "PSNLIB_DATA": str(data), "OMP_NUM_THREADS": "1"}
    source = Path(__file__).resolve().parent.parent / "notebooks" / "00_quickstart.ipynb"
    command = [sys.executable, "-m", "papermill", str(source), str(tmp_path / "out.ipynb")]
    command += ["-p", *parameter, "--execution-timeout", "120", "--cwd", str(tmp_path)]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode != 0
    assert message in done.stderr + done.stdout
    assert not (data / "cache").exists(), "something was built before the check"
    assert time.perf_counter() - start < 120


def _problems(policies: list[str], seeds: tuple[int, ...], benchmarks: tuple[str, ...]):
    """A per-problem table as compare returns it: policy a solves 4 of 16 samples of every
    problem, the others 2 (the base policy at its one seed)."""
    rows = []
    for i, policy in enumerate(policies):
        for seed in seeds[:1] if policy == "base" else seeds:
            for benchmark in benchmarks:
                for prompt in ("p1", "p2"):
                    correct = 4 if i == 0 else 2
                    rows.append(
                        {"policy": policy, "seed": seed, "benchmark": benchmark}
                        | {"prompt": prompt, "n": 16, "correct": correct, "step_validity": 0.5}
                    )
    return pd.DataFrame(rows)


def test_paper_beside_ours_lists_the_experiments_claims_with_our_numbers():
    plan = experiments.rl_narrows_coverage(get_profile("smoke"))
    problems = _problems(["base", "GRPO"], plan.seeds, plan.benchmarks)
    table = notebook.paper_beside_ours(plan, {"problems": problems})
    claims = [c for c in CLAIMS if c.experiment is experiments.rl_narrows_coverage]
    assert list(table.index) == [c.name for c in claims]
    assert list(table["paper"]) == [c.paper for c in claims]
    k = get_profile("smoke").ks[-1]
    pass_n = 100 * (1 - math.comb(12, k) / math.comb(16, k))  # 4 of 16 correct, k = n: 100
    narrows = table.loc["RL narrows pass@k at large k"]
    assert narrows["ours"] == f"base {pass_n:.1f} vs GRPO 100.0 (pass@{k})"
    raises = table.loc["RL raises pass@1"]
    assert raises["ours"] == "GRPO 12.5 vs base 25.0 (pass@1)"  # 2/16 vs 4/16
    assert raises["difference [95% CI]"].startswith("-12.5 [")
    assert raises["verdict"] == "contradicted" and raises["seeds"] == len(plan.seeds)
    assert raises["MDE"] == 0.0  # every seed the same difference: no spread


def test_paper_beside_ours_takes_another_experiments_claims():
    plan = experiments.adaptive_scheduler(get_profile("smoke"))
    labels = ["PSN adaptive II", "GRPO", "PSN fixed", "PSN adaptive I (KL)"]
    problems = _problems(labels, plan.seeds, plan.benchmarks)
    seconds = {"PSN adaptive II": 2.0, "PSN fixed": 1.0}  # every step; the ablations: seed 0
    logs = pd.DataFrame(
        [
            {"policy": p, "seed": 0, "step": i, "step_time": t}
            for p, t in seconds.items()
            for i in (1, 2)
        ]
    )
    results = {"problems": problems, "logs": logs}  # as plan.run() returns them
    table = notebook.paper_beside_ours(plan, results, experiments.main_results)
    assert "Adaptive beats fixed sigma" in table.index
    throughput = table.loc["Variant II costs at most ~8% throughput"]  # from the logs handed
    assert throughput["ours"] == "PSN adaptive II 30.0 vs PSN fixed 60.0 (throughput)"
    own = notebook.paper_beside_ours(plan, {"problems": problems})
    assert list(own.index) == [
        "Variant I (KL target) raises pass@256",
        "Variant II beats Variant I",
    ]
    entropy = experiments.entropy_dynamics(get_profile("smoke"))
    with pytest.raises(ValueError, match="no claim of the papers is tested by .*'entropy_dyn"):
        notebook.paper_beside_ours(entropy, {"problems": problems})


def test_the_conclusion_is_computed_from_the_verdict_rows():
    plan = experiments.rl_narrows_coverage(get_profile("smoke"))
    problems = _problems(["base", "GRPO"], plan.seeds, plan.benchmarks)
    text = notebook.conclusion(plan, {"problems": problems}).data
    table = notebook.paper_beside_ours(plan, {"problems": problems})
    assert text.startswith(f"**What this experiment finds at the smoke profile** ({len(table)}")
    # one line per claim, each with the verdict of its row: nothing written by hand
    for claim, row in table.iterrows():
        line = next(x for x in text.splitlines() if x.startswith(f"- **{claim}**"))
        assert f"*{row['verdict']}*" in line
    assert "RL raises pass@1** (pass@1, 2 seeds): *contradicted*; ours - theirs -12.5" in text
    # other runs, other words: the same claim reads reproduced where GRPO solves more
    better = _problems(["GRPO", "base"], plan.seeds, plan.benchmarks)  # the sides swapped
    assert "RL raises pass@1** (pass@1, 2 seeds): *reproduced*" in (
        notebook.conclusion(plan, {"problems": better}).data
    )
