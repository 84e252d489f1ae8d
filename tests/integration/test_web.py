"""The web page in a real browser: Debian's chromium, headless, driven through chromium-driver
(Selenium), against the real local-mode cluster. The page must follow the cluster live, with no
reload: a job appears, goes PD -> R -> CD, its log streams, and cancel works; the queue reads like
squeue (an array's pending tasks one row) and ended jobs move to the history. Screenshots go to
artifacts/ (web-overview.png, web-job.png, web-phone.png)."""

import shutil
import time
from pathlib import Path

import pytest

from tests.conftest import wait_until
from tests.integration.api_client import Api
from tests.integration.conftest import JOBS

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts"

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def browser():
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.fail("chromium and chromedriver are not installed; make test installs them "
                    "(sudo apt-get install -y chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console, read at the end
    b = webdriver.Chrome(service=Service(driver), options=options)
    ARTIFACTS.mkdir(exist_ok=True)
    yield b
    b.quit()


def find(browser, css):
    from selenium.webdriver.common.by import By

    return browser.find_elements(By.CSS_SELECTOR, css)


def attr(browser, css, name):
    """An attribute read in one step in the page (the page re-renders its tables live, so an
    element found a moment ago may be gone)."""
    return browser.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.getAttribute(arguments[1]) : null", css, name)


def text(browser, css):
    return browser.execute_script("const e = document.querySelector(arguments[0]); return e ? e.textContent : ''", css)


def click(browser, css) -> bool:
    """Click it from a timer, so a confirm() it opens does not block this call."""
    return browser.execute_script(
        "const e = document.querySelector(arguments[0]); if (e) setTimeout(() => e.click(), 0); return !!e", css)


def test_the_page_follows_a_job_live_streams_its_log_and_cancels(browser, idle_cluster, tmp_path):
    api = idle_cluster.api
    browser.get(api["url"])
    find(browser, "#token")[0].send_keys(api["token"])
    find(browser, "#signin-button")[0].click()
    wait_until(lambda: text(browser, "#user"), 15, message="signed in")
    wait_until(lambda: len(find(browser, "#nodes tbody tr[data-node]")) == 3, 15, message="three nodes")
    browser.execute_script("window.notReloaded = true")

    gate = tmp_path / "gate"
    job_id = Api(idle_cluster).submit(api["token"], (JOBS / "chatty.py").read_text(), script_name="chatty.py",
                    nodes=3, args=["30", str(gate), "0.3"], job_name="browser-job")
    row = f'#queue tbody tr[data-job-id="{job_id}"] td.state'
    wait_until(lambda: attr(browser, row, "data-state") in ("PD", "R"), 15, message="the job in the queue")
    wait_until(lambda: attr(browser, row, "data-state") == "R", 60, message="R without a reload")
    wait_until(lambda: find(browser, f'#running article[data-job-id="{job_id}"]'), 15, message="running panel")
    gate.touch()
    wait_until(lambda: attr(browser, f'#running article[data-job-id="{job_id}"] .bar', "aria-valuenow")
               not in (None, "", "0"), 30, message="a progress bar that moves")
    browser.save_screenshot(str(ARTIFACTS / "web-overview.png"))

    browser.execute_script(f"location.hash = '#/jobs/{job_id}'")
    wait_until(lambda: attr(browser, "#log-state", "data-state") == "CD", 90, message="the log's end: CD")
    log = text(browser, "#log")
    for node in ("master-node", "worker-node-1", "worker-node-2"):
        assert f"{node}: rank" in log and "line 30 of 30" in log, log[-500:]
    assert idle_cluster.cli("logs", job_id, "--node", "worker-node-2").stdout.splitlines()[-2].split(" ", 2)[-1] in log
    wait_until(lambda: attr(browser, "#job-state", "data-state") == "CD", 15, message="the job state CD")
    wait_until(lambda: attr(browser, '#job-charts svg.chart polyline[data-series="attempt 1"]', "points"), 15,
               message="the report's loss chart")
    assert "COMPLETED" in text(browser, "#log-state")
    browser.set_window_size(1280, 2000)  # the whole job page: fields, progress, report charts, log
    time.sleep(0.5)
    browser.save_screenshot(str(ARTIFACTS / "web-job.png"))
    browser.set_window_size(1280, 1000)
    assert browser.execute_script("return window.notReloaded") is True, "the page reloaded"

    held = tmp_path / "never"
    victim = Api(idle_cluster).submit(api["token"], (JOBS / "gate.py").read_text(), script_name="gate.py", args=[str(held)])
    browser.execute_script("location.hash = '#/'")
    button = f'#queue tbody tr[data-job-id="{victim}"] button'
    wait_until(lambda: click(browser, button), 30, message="a cancel button")
    alert = wait_until(lambda: _alert(browser), 5, message="the confirmation")
    alert.accept()
    wait_until(lambda: attr(browser, f'#history tbody tr[data-job-id="{victim}"] td.state', "data-state") == "CA",
               30, message="CA after cancel, in the history")
    assert not find(browser, f'#queue tbody tr[data-job-id="{victim}"]'), "the queue: pending and running jobs only"
    assert idle_cluster.show(victim)["state"] == "CANCELLED"
    _an_array_reads_like_squeue(browser, api, idle_cluster, held)
    assert browser.execute_script("return window.notReloaded") is True

    browser.set_window_size(390, 844)
    time.sleep(0.5)
    assert browser.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1"), \
        "on a phone the page does not scroll sideways (tables scroll inside their panels)"
    browser.save_screenshot(str(ARTIFACTS / "web-phone.png"))
    browser.set_window_size(1280, 1000)
    browser.get(api["url"] + "docs")  # the API's docs render offline, under their own CSP
    wait_until(lambda: len(find(browser, ".swagger-ui .opblock")) >= 15, 30, message="Swagger UI lists the routes")
    assert "/jobs/{job_id}/logs/stream" in text(browser, ".swagger-ui")
    console = [e["message"] for e in browser.get_log("browser")]
    refused = [m for m in console if "Content Security Policy" in m or "Uncaught" in m]
    assert not refused, "the page runs under its CSP with no script errors: " + "; ".join(refused)


def _an_array_reads_like_squeue(browser, api, cluster, held):
    """squeue's rows: an array's pending tasks that wait alike are one row (``A_[2-20%2]``, the
    throttle shown), its running tasks one row each; cancelled before they ran, those tasks are
    one history row, and the tasks that ran a row each."""
    array = Api(cluster).submit(api["token"], (JOBS / "gate.py").read_text(), script_name="gate.py",
                                args=[str(held)], array="0-20%2")
    pending = f'#queue tbody tr[data-row-id="{array}_[2-20%2]"]'
    wait_until(lambda: attr(browser, pending, "data-count") == "19"
               and all(attr(browser, f'#queue tbody tr[data-row-id="{array}_{i}"] td.state', "data-state") == "R"
                       for i in (0, 1))
               and text(browser, "#queue-total") == ": 3 rows, 21 jobs", 60, message="2 running rows, 1 pending row")
    wait_until(lambda: click(browser, pending + " button"), 15, message="the collapsed row's cancel button")
    wait_until(lambda: _alert(browser), 5, message="the confirmation").accept()
    wait_until(lambda: attr(browser, f'#history tbody tr[data-row-id="{array}_[2-20%2]"]', "data-count") == "19",
               30, message="the cancelled pending tasks as one history row")
    wait_until(lambda: text(browser, "#queue-total") == ": 2 rows, 2 jobs", 15, message="the running tasks left")
    cluster.cli("cancel", array)
    ran = [f'#history tbody tr[data-row-id="{array}_{i}"] td.state' for i in (0, 1)]
    wait_until(lambda: all(attr(browser, css, "data-state") == "CA" for css in ran), 30,
               message="the tasks that ran: a history row each")
    wait_until(lambda: text(browser, "#queue-total") == ": 0 rows, 0 jobs", 15, message="an empty queue")


def _alert(browser):
    from selenium.common.exceptions import NoAlertPresentException

    try:
        return browser.switch_to.alert
    except NoAlertPresentException:
        return None
