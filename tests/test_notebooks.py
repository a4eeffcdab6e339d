"""Every notebook runs headless with papermill at the smoke profile, writes sane metrics, a figure
and a table, and is published executed with its figures inline; the committed notebooks (the
source people edit in JupyterLab) are thin and stored without outputs."""

import json
import re
from pathlib import Path

import nbformat
import pytest

from psnlib.replication.analysis import summaries
from psnlib.replication.compute import pool
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.records import ledger
from psnlib.replication.report.notebook_runs import notebook_paths, run_notebook

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = notebook_paths(NOTEBOOK_DIR)
# Notebooks whose comparisons run at the ablation seeds: each arm is read paired with its
# reference over the same seeds, never beside per-policy means of a single seed (issue 31).
ABLATIONS = ("04_", "05_", "06_", "07_", "08_", "09_", "14_")
# Every notebook that compares trained arms shows the paired differences (summaries.paired_*).
PAIRED = (*ABLATIONS, "03_", "13_", "16_")


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_is_stored_without_outputs_and_has_one_parameters_cell(path):
    nb = nbformat.read(path, as_version=4)
    tagged = [c for c in nb.cells if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1, f"{path.name} needs exactly one 'parameters' cell"
    assert "profile =" in tagged[0].source
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert not cell.get("outputs") and cell.get("execution_count") is None, path.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_code_is_thin(path):
    """Longer logic belongs in psnlib, with a test."""
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "code":
            assert len(cell.source.splitlines()) <= 16, f"{path.name}: a cell is too long"
            assert "def " not in cell.source, f"{path.name}: define functions in psnlib"


def _code(path: Path) -> str:
    return "\n".join(
        c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"
    )


def test_the_exploration_baselines_notebook_is_among_the_notebooks():
    assert "16_exploration_baselines" in [p.stem for p in NOTEBOOKS]
    assert {p.name[:3] for p in NOTEBOOKS} >= set(PAIRED)  # no listed notebook went missing


@pytest.mark.parametrize(
    "path",
    [p for p in NOTEBOOKS if p.name.startswith(PAIRED)],
    ids=[p.stem for p in NOTEBOOKS if p.name.startswith(PAIRED)],
)
def test_arms_are_read_paired_with_their_reference_over_seeds(path):
    """An arm's difference from its reference is shown per seed pair, with a paired interval;
    an ablation notebook no longer lists per-policy means side by side as its result."""
    code = _code(path)
    assert "summaries.paired_differences(" in code or "summaries.paired_seed_differences(" in code
    assert "summaries.paired_table(" in code
    if path.name.startswith(ABLATIONS):
        assert "summaries.headline(" not in code, path.name
    if path.name.startswith(tuple(a for a in ABLATIONS if a != "09_")):  # 09: main seeds too
        assert "summaries.pass_table(" not in code, path.name


# Notebooks that end with the paragraph computed from their verdict rows (notebook.conclusion of
# each experiment whose claims they show), and whose markdown copies none of the papers' numbers:
# those live in the claims (psnlib.replication.analysis.claims) and reach the reader through
# paper_beside_ours' "paper" column (issue 41 item 9). 00, 01 and 15 show no claims table of
# their own (15 prints RESULTS.md, computed whole). Those that read pass@max at equal pass@1
# against GRPO's measured training path (ON_THE_PATH) build it from the records.
CONCLUDED = ("01b_", "02_", "03_", "04_", "05_", "06_", "07_", "08_", "09_", "10_", "11_", "12_")
CONCLUDED += ("13_", "14_", "16_")
ONE_SOURCE = (*CONCLUDED, "00_", "01_", "15_")
ON_THE_PATH = ("03_", "16_")


@pytest.mark.parametrize(
    "path",
    [p for p in NOTEBOOKS if p.name.startswith(CONCLUDED)],
    ids=[p.stem for p in NOTEBOOKS if p.name.startswith(CONCLUDED)],
)
def test_the_notebook_ends_with_its_computed_conclusion(path):
    cells = nbformat.read(path, as_version=4).cells
    last = cells[-1]
    assert last.cell_type == "code" and "notebook.conclusion(" in last.source, path.name
    code = _code(path)
    shown = code.count("notebook.paper_beside_ours(")
    assert shown and last.source.count("notebook.conclusion(") == shown, "one per claims table"
    if path.name.startswith(ON_THE_PATH):
        for call in ("frontier.training_paths(", "frontier.frontier_table(", "plot_training_path("):
            assert call in code, f"{path.name} does not call {call}"


def _paper_numbers() -> set[str]:
    """The papers' pass@k values quoted in the claims (e.g. 74.7, 67.76)."""
    from psnlib.replication.analysis.claims import CLAIMS

    found = {n for c in CLAIMS for n in re.findall(r"(?<![\d.])\d{2}\.\d+", c.paper)}
    assert {"74.7", "76.94", "67.76", "38.29"} <= found
    return found


@pytest.mark.parametrize(
    "path",
    [p for p in NOTEBOOKS if p.name.startswith(ONE_SOURCE)],
    ids=[p.stem for p in NOTEBOOKS if p.name.startswith(ONE_SOURCE)],
)
def test_the_papers_numbers_are_not_copied_into_markdown(path):
    numbers = _paper_numbers()
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "markdown":
            copied = set(re.findall(r"(?<![\d.])\d+\.\d+(?![\d])", cell.source)) & numbers
            assert not copied, f"{path.name} copies the papers' {sorted(copied)}: use the claims"


def _pass_at_k_tables(obj):
    """Every {"k": value} mapping with integer keys found in the metrics."""
    if isinstance(obj, dict):
        if obj and all(str(k).isdigit() for k in obj):
            yield {int(k): v for k, v in obj.items()}
        for v in obj.values():
            yield from _pass_at_k_tables(v)


@pytest.fixture(scope="module")
def shared_data(tmp_path_factory):
    """One fresh data directory and run ledger for all notebooks, as in `make reproduce`: the
    plan's tasks are computed first (two workers), each writing its record, and the notebooks
    read the records."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PSNLIB_DATA", str(tmp_path_factory.mktemp("data")))
        mp.setenv(ledger.RESULTS_ENV, str(tmp_path_factory.mktemp("results")))
        status = pool.prepare(get_profile("smoke"), workers=2)
        assert (status["state"] == "done").all(), status[status["state"] != "done"]
        yield tmp_path_factory.mktemp("out")


@pytest.mark.notebooks
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_at_smoke_profile(path, shared_data):
    figures = shared_data / "figures"
    metrics_path = run_notebook(path, "smoke", figures, shared_data / "runs")
    metrics = json.loads(metrics_path.read_text())
    assert metrics["profile"] == "smoke"
    tables = list(_pass_at_k_tables(metrics))
    assert tables, "metrics hold no pass@k table"
    for table in tables:
        values = [table[k] for k in sorted(table)]
        assert all(0.0 <= v <= 1.0 for v in values)
        assert all(a <= b + 1e-12 for a, b in zip(values, values[1:], strict=False))
    saved = list(figures.glob(f"{path.stem}*.png"))
    assert saved, "no figure written"
    assert list(figures.glob(f"{path.stem}*.csv")), "no table written"
    # The executed notebook, published beside the figures, shows each saved figure once, inline,
    # and no warning (stderr) output.
    executed = nbformat.read(figures / "notebooks" / path.name, as_version=4)
    outputs = [out for cell in executed.cells if cell.cell_type == "code" for out in cell.outputs]
    shown = [out for out in outputs if "image/png" in out.get("data", {})]
    assert len(shown) == len(saved), f"{len(shown)} figures shown, {len(saved)} saved"
    stderr = [out.text for out in outputs if out.get("name") == "stderr"]
    assert not stderr, f"warnings in the executed notebook: {stderr}"
    assert "widgets" not in executed.metadata, "widget state in the published notebook"
    assert_whole_report(outputs)
    if path.name.startswith(ABLATIONS) and len(get_profile("smoke").ablation_seeds) == 1:
        # one ablation seed at smoke: every paired table says its rows are exploratory
        shown = [str(out.get("data", {}).get("text/plain", "")) for out in outputs]
        assert any(summaries.ONE_SEED in text for text in shown), "no exploratory note shown"


# Notebooks whose tables come from records alone, re-made from a data directory emptied of
# weights and caches: those that once loaded policies themselves, and the claims (15), which read
# every plan. 00 trains its own quickstart run.
FROM_RECORDS = ("01_", "01b_", "02_", "03_", "09_", "11_", "15_")


@pytest.mark.notebooks
def test_records_alone_remake_the_tables_without_training(shared_data, tmp_path, monkeypatch):
    """After the tier above (records made, notebooks run), the notebooks that read policies
    before run again on an empty data directory: nothing is trained, evaluated or built, and
    every table they write is byte-identical to the first run's."""
    first = shared_data / "figures"
    paths = [p for p in NOTEBOOKS if p.name.startswith(FROM_RECORDS)]
    assert len(paths) == len(FROM_RECORDS)
    for path in paths:  # run alone, this test makes the first run itself
        if not (first / f"{path.stem}.json").exists():
            run_notebook(path, "smoke", first, shared_data / "runs")
    empty = tmp_path / "data"
    monkeypatch.setenv("PSNLIB_DATA", str(empty))
    again = tmp_path / "figures"
    for path in paths:
        run_notebook(path, "smoke", again, tmp_path / "runs")
        tables = sorted(first.glob(f"{path.stem}_*.csv"))
        assert tables, f"{path.stem} wrote no table"
        for table in tables:
            assert (again / table.name).read_bytes() == table.read_bytes(), table.name
    made = [p for p in empty.rglob("*") if p.is_file()] if empty.exists() else []
    assert not made, f"computed with no records: {made[:5]}"


FIRST_STATE = re.compile(r"(?<![\d.])0%\|")  # a progress bar shown at its start
# pandas' cuts: a "..." cell of an HTML table (a cut column or row), or a text row of dots only
# pandas' cuts: a "..." cell of an HTML table, a text row of dots only, or its "[R rows x C
# columns]" footer
CUT_CELL = re.compile(
    r"<t[dh][^>]*>\.\.\.</t[dh]>|^[ \t]*\.\.+(?:[ \t]+\.\.+)+[ \t]*$|^\[\d+ rows x \d+ columns\]$",
    re.M,
)


def assert_whole_report(outputs: list) -> None:
    """The published report shows each progress bar in its final state, and every table whole:
    no "0%" bar (the widget's text fallback) and no cell that pandas cut to "..."."""
    for out in outputs:
        data = out.get("data", {})
        text = data.get("text/plain", "") + out.get("text", "")
        assert not FIRST_STATE.search(text), f"a progress bar at its first state: {text[:200]}"
        for shown in (data.get("text/html", ""), data.get("text/plain", "")):
            assert not CUT_CELL.search(shown), f"a table shown cut: {shown[:300]}"


def test_the_report_check_fails_on_a_first_state_bar_and_a_cut_table():
    with pytest.raises(AssertionError, match="first state"):
        assert_whole_report([{"data": {"text/plain": "policies:   0%|          | 0/3"}}])
    with pytest.raises(AssertionError, match="cut"):
        assert_whole_report([{"data": {"text/html": "<tr><td>1</td><td>...</td></tr>"}}])
    with pytest.raises(AssertionError, match="cut"):
        assert_whole_report(
            [{"data": {"text/plain": "   a  ...  f\n0  0  ...  0\n.. ..  ... ..\n"}}]
        )
    assert_whole_report([{"data": {"text/plain": "policies: 100%|##########| 3/3 (10.0%)"}}])
    assert_whole_report([{"data": {"text/html": "<td>... at about equal pass@1</td>"}}])


def test_outputs_go_where_asked_and_only_filters_by_name(tmp_path):
    from psnlib.replication.report.notebook_runs import ROOT, notebook_outputs

    assert notebook_outputs("smoke", tmp_path / "f") == tmp_path / "f"
    assert (tmp_path / "f").is_dir()
    assert notebook_outputs("cpu") == ROOT / "figures" / "cpu"  # the default: by profile
    assert [p.stem for p in notebook_paths(NOTEBOOK_DIR, ["03_", "13_"])] == [
        "03_main_results",
        "13_ood",
    ]
    with pytest.raises(ValueError, match="matches no notebook"):
        notebook_paths(NOTEBOOK_DIR, ["nope"])
