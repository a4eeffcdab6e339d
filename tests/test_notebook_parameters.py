"""Every notebook refuses a bad papermill parameter at its check, before any work (issue 39).

Each notebook is parameterized by papermill's own command line (``--prepare-only``: the injected
cell, with papermill's reading of ``-p``/``-y`` values, and nothing executed), then its code cells
run in an IPython shell, as in a kernel (``In`` is the input history the check reads), up to and
including the statement that calls ``notebook.check_parameters``: only imports, a few seconds
for the first notebook and milliseconds after. A notebook whose cells are in another order (an
import cell between the parameters and the check, as 01b had) must refuse the same parameters.
"""

import ast
import re
import sys
import types
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner
from IPython.core.interactiveshell import InteractiveShell
from papermill.cli import papermill
from traitlets.config import Config

from psnlib.replication.plan.profiles import PROFILES
from psnlib.replication.report import notebook
from psnlib.trainer.config_checks import MAX_SEED

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
IDS = [p.stem for p in NOTEBOOKS]
KNOWN = "known: profile, seeds, figures_dir, metrics_path"
ALLOWED_PROFILES = re.escape(f"allowed: {sorted(PROFILES)}")
SEEDS = r"seeds must be None or a non-empty list or tuple of integers >= 0, got "

# papermill arguments -> the one-line refusal (a regular expression, searched)
BAD = [
    (["-p", "sedes", "1"], rf"^unknown notebook parameter\(s\) sedes; {KNOWN}$"),
    (["-p", "profil", "smoke"], rf"^unknown notebook parameter\(s\) profil; {KNOWN}$"),
    (
        ["-y", "sedes: [0, 1]", "-p", "x", ""],
        rf"^unknown notebook parameter\(s\) sedes, x; {KNOWN}$",
    ),
    (["-p", "sedes", "nan"], rf"parameter\(s\) sedes; {KNOWN}$"),  # float('nan') in the cell
    (["-p", "sedes", "-1e400"], rf"parameter\(s\) sedes; {KNOWN}$"),  # float('-inf')
    (["-p", "profile", "1"], rf"profile must be a profile name, got 1; {ALLOWED_PROFILES}$"),
    (["-p", "profile", "nan"], rf"profile must be a profile name, got nan; {ALLOWED_PROFILES}$"),
    (["-p", "profile", "None"], rf"profile must be a profile name, got None; {ALLOWED_PROFILES}"),
    (["-p", "profile", "True"], rf"profile must be a profile name, got True; {ALLOWED_PROFILES}"),
    (["-y", "profile: [smoke]"], r"profile must be a profile name, got \['smoke'\]; allowed: "),
    (["-p", "profile", ""], r"^notebook parameter profile: unknown profile ''; allowed: \["),
    (["-p", "profile", "SMOKE"], r"^notebook parameter profile: unknown profile 'SMOKE'; allowed"),
    (["-p", "profile", "smoke "], r"unknown profile 'smoke '; allowed: \['cpu', "),
    (["-p", "seeds", "(0, 1)"], rf"{SEEDS}'\(0, 1\)'; with papermill pass a list: -y "),
    (["-p", "seeds", ""], rf"^notebook parameter {SEEDS}''; with papermill pass a list"),
    (["-p", "seeds", "1"], rf"{SEEDS}1$"),
    (["-p", "seeds", "nan"], rf"{SEEDS}nan$"),
    (["-p", "seeds", "1e400"], rf"{SEEDS}inf$"),
    (["-y", "seeds: []"], rf"{SEEDS}\[\]$"),
    (["-y", "seeds: [.nan]"], rf"{SEEDS}\[nan\]$"),
    (["-y", "seeds: [.inf]"], rf"{SEEDS}\[inf\]$"),
    (["-y", "seeds: [0, 1.0]"], rf"{SEEDS}\[0, 1\.0\]$"),
    (["-y", "seeds: [-1]"], rf"{SEEDS}\[-1\]$"),
    (["-y", "seeds: [true]"], rf"{SEEDS}\[True\]$"),
    (["-y", "seeds: ['0']"], rf"{SEEDS}\['0'\]$"),
    (["-y", "seeds: {0: 1}"], rf"{SEEDS}\{{'0': 1\}}$"),  # papermill quotes keys
    (["-y", f"seeds: [0, {MAX_SEED + 1}]"], rf"integers in \[0, {MAX_SEED}\] .*, got \[0, 4294"),
    (["-y", "seeds: [1" + "0" * 40 + "]"], rf"seeds must be integers in \[0, {MAX_SEED}\]"),
    (["-y", "seeds: [0, 1, 0]"], r"seeds must be distinct .*, got \[0, 1, 0\]$"),
    (["-p", "figures_dir", ""], r"figures_dir must be None \(the default place\) .*, got ''"),
    (["-p", "figures_dir", "1"], r"^notebook parameter figures_dir must be None or a path, got 1$"),
    (["-p", "metrics_path", "nan"], r"metrics_path must be None or a path, got nan$"),
    (["-p", "metrics_path", " "], r"metrics_path must be None .* or a path, got ' ', an empty"),
    (["-y", "metrics_path: [a]"], r"metrics_path must be None or a path, got \['a'\]$"),
]


@pytest.fixture(scope="module")
def shell():
    """One IPython shell (the kernel's interpreter, without a kernel), its history in memory,
    its namespace in a module of its own rather than ``__main__``; each notebook resets it."""
    main = sys.modules.get("__main__")
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    config.InteractiveShell.cache_size = 0  # no output cache: a reset needs no gc.collect
    ipython = InteractiveShell.instance(
        config=config, user_module=types.ModuleType("notebook_under_test")
    )
    # The tests read the error itself: no traceback printed, or formatted for the history.
    ipython.showtraceback = lambda *args, **kwargs: None
    ipython._format_exception_for_storage = lambda *args, **kwargs: {}
    yield ipython
    InteractiveShell.clear_instance()
    sys.modules["__main__"] = main


def prepared(path: Path, tmp_path: Path, args: list[str]) -> nbformat.NotebookNode:
    """The notebook as papermill runs it with ``args`` (``-p``, ``-y``): its injected cell, and
    no cell executed (``--prepare-only``)."""
    out = tmp_path / path.name
    command = [str(path), str(out), "--prepare-only", "--log-level", "ERROR", *args]
    done = CliRunner().invoke(papermill, command, catch_exceptions=False)
    assert done.exit_code == 0, done.output
    return nbformat.read(out, as_version=4)


def _check_statement(source: str) -> ast.stmt | None:
    """The top-level statement of a cell that calls ``check_parameters``, if any."""
    for statement in ast.parse(source).body:
        for node in ast.walk(statement):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) == (
                "check_parameters"
            ):
                return statement
    return None


def run_to_check(shell: InteractiveShell, nb: nbformat.NotebookNode) -> BaseException | None:
    """Run ``nb``'s code cells in a fresh namespace, as a kernel does, up to and including the
    statement that calls ``check_parameters`` (nothing after it); the error it raised, if any."""
    shell.reset(new_session=True)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        check = _check_statement(cell.source)
        source = cell.source
        if check is not None:
            source = "\n".join(source.splitlines()[: check.end_lineno])
        error = shell.run_cell(source, store_history=True).error_in_exec
        if check is not None:
            return error
        assert error is None, f"a cell before the check failed: {error!r}"
    raise AssertionError("no cell calls notebook.check_parameters")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_the_check_is_the_first_code_after_the_parameters(path):
    """The cell right after the parameters (after papermill's injected cell) checks them, with
    nothing but imports before the check: a mistyped parameter fails before any work."""
    cells = nbformat.read(path, as_version=4).cells
    tagged = [i for i, c in enumerate(cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{path.name}: one 'parameters' cell"
    after = next(c for c in cells[tagged[0] + 1 :] if c.cell_type == "code")
    check = _check_statement(after.source)
    assert check is not None, f"{path.name}: the first code cell after the parameters is no check"
    assert ast.unparse(check) == "notebook.check_parameters(globals())"
    before = ast.parse(after.source).body
    before = before[: before.index(next(s for s in before if s.lineno == check.lineno))]
    assert all(isinstance(s, (ast.Import, ast.ImportFrom)) for s in before), path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_an_unknown_parameter_is_refused_at_the_check(path, tmp_path, shell):
    nb = prepared(path, tmp_path, ["-p", "profile", "smoke", "-p", "sedes", "1"])
    error = run_to_check(shell, nb)
    assert isinstance(error, ValueError), f"{path.name} ran on with -p sedes 1: {error!r}"
    assert str(error) == f"unknown notebook parameter(s) sedes; {KNOWN}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_known_parameters_pass_the_check(path, tmp_path, shell):
    args = ["-p", "profile", "smoke", "-y", "seeds: [0, 1]", "-p", "figures_dir", str(tmp_path)]
    args += ["-p", "metrics_path", str(tmp_path / "m.json"), "--inject-paths"]
    assert run_to_check(shell, prepared(path, tmp_path, args)) is None
    assert run_to_check(shell, prepared(path, tmp_path, [])) is None  # no injected cell


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
@pytest.mark.parametrize(("args", "message"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_bad_parameter_is_one_line_naming_it_and_what_is_allowed(
    path, args, message, tmp_path, shell
):
    error = run_to_check(shell, prepared(path, tmp_path, args))
    assert isinstance(error, ValueError), f"{path.name} ran on with {args}: {error!r}"
    assert "\n" not in str(error), str(error)
    assert re.search(message, str(error)), str(error)


def test_a_cell_of_imports_or_of_work_between_the_parameters_and_the_check_hides_nothing(
    tmp_path, shell
):
    """The order 01b had (parameters, imports, check), and a check after cells of work: the
    injected cell is still found; a scratch cell of literals run after work is not a parameter."""
    nb = prepared(NOTEBOOKS[0], tmp_path, ["-p", "sedes", "nan"])
    code = [c for c in nb.cells if c.cell_type == "code"]
    injected = next(i for i, c in enumerate(code) if "injected-parameters" in c.metadata.tags)
    imports = nbformat.v4.new_code_cell(
        "import math\nfrom psnlib.replication.report import notebook"
    )
    work = nbformat.v4.new_code_cell("K = math.floor(2.5)\nN = 3")
    check = nbformat.v4.new_code_cell("notebook.check_parameters(globals())")
    for between in ([imports], [imports, work], [imports, work, work]):
        nb.cells = [*code[: injected + 1], *between, check]
        error = run_to_check(shell, nb)
        assert str(error) == f"unknown notebook parameter(s) sedes; {KNOWN}", between
    # A check run again in the same kernel, after a scratch cell of literals and a cell of work,
    # stops at the earlier check: the scratch cell is no parameter.
    nb.cells = [*code[: injected + 1], imports, work, check]
    assert isinstance(run_to_check(shell, nb), ValueError)
    for source in ("scratch = 1", "K = math.floor(2.5)", "notebook.check_parameters(globals())"):
        assert shell.run_cell(source, store_history=True).error_in_exec is None
    assert notebook.given_parameters(shell.user_ns) == []
