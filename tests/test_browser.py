"""Acceptance, as a reader meets the project: JupyterLab in headless Chromium opens notebook 00 at
the smoke profile, Run All, and the page shows no error, at least one inline figure and no
warning (stderr) box. Notebook 00 reads the base policy's and PSN's seed-0 records from the run
ledger (only its live demo trains), so the fixture computes those two records first, as
``make reproduce`` would.

Needs Chromium (``/usr/bin/chromium``, Debian's ``chromium``; ``PSNLIB_CHROMIUM`` names another),
Playwright for Python and JupyterLab (the dev extra). Skipped when they are missing, except in CI
(``CI=true``), where it fails.
"""

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from psnlib.replication.compute import jobs
from psnlib.replication.plan import experiments, schedule
from psnlib.replication.plan.profiles import get_profile
from psnlib.replication.records import ledger

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "00_quickstart.ipynb"
CHROMIUM = Path(os.environ.get("PSNLIB_CHROMIUM", "/usr/bin/chromium"))
RUN_ALL_SECONDS = 420  # a couple of minutes on 2 busy cores; the bound, not the expectation

PROMPTS = ".jp-CodeCell .jp-InputPrompt"  # "[ ]:" not run, "[*]:" queued or running, "[3]:" run

pytestmark = pytest.mark.browser


def _missing() -> list[str]:
    missing = [] if CHROMIUM.exists() else [f"chromium ({CHROMIUM})"]
    for module in ("playwright", "jupyterlab"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    return missing


def _records_of_notebook_00(root: Path) -> None:
    """The smoke records notebook 00 reads, computed into ``root``'s ledger and data folder: the
    base policy's (its pass@k) and PSN fixed's at the first seed (its training log)."""
    smoke = get_profile("smoke")
    wanted = {experiments.BASE_POLICY.label, experiments.PSN.label}
    tasks = [
        t for t in schedule.tasks(smoke) if t.variant.label in wanted and t.seed == smoke.seeds[0]
    ]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PSNLIB_DATA", str(root / "data"))
        mp.setenv(ledger.RESULTS_ENV, str(root / "results"))
        for task in tasks:
            jobs.run_task(smoke, task)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on a free localhost port with a token, serving a temp folder that holds a copy
    of notebook 00 set to the smoke profile; its data (PSNLIB_DATA) in a temp folder too."""
    if missing := _missing():
        reason = f"the browser test needs {', '.join(missing)}"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{reason} (CI installs them: .ci/run)")
        pytest.skip(f"{reason}: apt-get install chromium; pip install -e '.[dev]'")
    root = tmp_path_factory.mktemp("lab")
    _records_of_notebook_00(root)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    cell.source += f'\nprofile = "smoke"\nfigures_dir = {str(root / "figures")!r}'
    nbformat.write(nb, root / NOTEBOOK.name)
    settings = {  # every cell in the page, so every output can be inspected; no popups
        "notebook-extension/tracker": {"windowingMode": "none", "autoStartDefaultKernel": True},
        "apputils-extension/notification": {"fetchNews": "false"},
    }
    for name, values in settings.items():
        path = root / "settings" / "@jupyterlab" / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    env |= {"PSNLIB_DATA": str(root / "data"), "JUPYTER_RUNTIME_DIR": str(root / "runtime")}
    env |= {ledger.RESULTS_ENV: str(root / "results")}
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1"]
    command += [f"--port={port}", f"--IdentityProvider.token={token}", f"--notebook-dir={root}"]
    command += [f"--LabApp.user_settings_dir={root / 'settings'}"]
    command += [f"--LabApp.workspaces_dir={root / 'workspaces'}"]
    command += ["--allow-root"] if os.geteuid() == 0 else []
    log = (root / "jupyter.log").open("w")
    server = subprocess.Popen(command, env=env, stdout=log, stderr=log, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=5)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    log_text = (root / "jupyter.log").read_text()
                    pytest.fail(f"JupyterLab did not start; its log:\n{log_text}")
                time.sleep(1)

        def api(path: str) -> list | dict:
            with urllib.request.urlopen(f"{url}/api/{path}?token={token}", timeout=10) as r:
                return json.loads(r.read())

        yield f"{url}/lab/tree/{NOTEBOOK.name}?token={token}", api, root
    finally:
        server.send_signal(signal.SIGTERM)  # the server shuts its kernels down
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def _settled(api, seconds: float = 5, timeout: float = 90) -> None:
    """Wait until the server holds one session whose kernel stayed the same and idle for
    ``seconds``: JupyterLab may replace the kernel it starts when the notebook opens, and cells
    queued on the first one are then dropped."""
    deadline, seen, since = time.monotonic() + timeout, None, time.monotonic()
    while time.monotonic() < deadline:
        kernels = [(s["kernel"]["id"], s["kernel"]["execution_state"]) for s in api("sessions")]
        if kernels != seen:
            seen, since = kernels, time.monotonic()
        elif len(kernels) == 1 and kernels[0][1] == "idle" and time.monotonic() - since > seconds:
            return
        time.sleep(0.5)
    pytest.fail(f"no settled kernel in {timeout} s: sessions {seen}")


# "done" when every code cell ran; "stopped" at an error or a dialog; "stalled" when no cell is
# queued or running but some never ran, 10 s after the click (the queue was dropped).
RUN_STATE = """([selector, n, clicked]) => {
    if (document.querySelector(".jp-Dialog, [data-mime-type*='jupyter.error']")) return "stopped";
    const prompts = [...document.querySelectorAll(selector)].map(p => p.textContent);
    if (prompts.filter(t => /\\[\\d+\\]/.test(t)).length === n) return "done";
    const idle = !prompts.some(t => t.includes("*")) && Date.now() - clicked > 10000;
    return idle && prompts.some(t => /\\[ \\]/.test(t)) ? "stalled" : false;
}"""


def _run_all(page, code_cells: int, tries: int = 2) -> None:
    """Run > Run All Cells and wait, within ``RUN_ALL_SECONDS``, until it is done or stopped;
    a dropped queue is run again, up to ``tries`` times."""
    for _ in range(tries):
        clicked = page.evaluate("Date.now()")
        page.locator(".lm-MenuBar-item", has_text="Run").first.click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        state = page.wait_for_function(
            RUN_STATE,
            arg=[PROMPTS, code_cells, clicked],
            timeout=RUN_ALL_SECONDS * 1000,
            polling=1000,
        ).json_value()
        if state != "stalled":
            return
    pytest.fail(f"Run All Cells left cells unrun {tries} times")


def test_run_all_in_jupyterlab_shows_figures_and_no_error_or_warning(lab):
    from playwright.sync_api import sync_playwright

    url, api, root = lab
    code_cells = sum(c.cell_type == "code" for c in nbformat.read(NOTEBOOK, as_version=4).cells)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            page.goto(url, timeout=90_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=90_000)
            idle = ".jp-Notebook-ExecutionIndicator[data-status='idle']"
            page.wait_for_selector(idle, timeout=90_000)
            _settled(api)
            start = time.monotonic()
            _run_all(page, code_cells)
            errors = page.locator("[data-mime-type='application/vnd.jupyter.error']")
            warnings = page.locator("[data-mime-type='application/vnd.jupyter.stderr']")
            images = page.locator(".jp-OutputArea-output img")
            found = {
                "dialogs": page.locator(".jp-Dialog").all_inner_texts(),
                "errors": errors.all_inner_texts(),
                "warnings": warnings.all_inner_texts(),
                "images": images.count(),
            }
            print(f"Run All: {time.monotonic() - start:.0f} s; {found}")
        finally:
            page.screenshot(path=str(root / "page.png"), full_page=True)
            browser.close()
    seen = f"(the page: {root / 'page.png'})"
    assert not found["dialogs"], f"a dialog interrupted Run All: {found['dialogs']} {seen}"
    assert not found["errors"], f"error output {found['errors']} {seen}"
    assert not found["warnings"], f"warning box {found['warnings']} {seen}"
    assert found["images"] >= 1, f"no inline figure {seen}"
