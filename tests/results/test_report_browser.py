"""The HTML report in a real browser: headless Chromium renders it, with no console error and every image loaded.

Needs Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them) and Selenium
(the ``dev`` extra). Without them the test is skipped, except under CI (``CI`` set), where
it fails: CI must not pass by skipping it. A screenshot of each page is saved next to the
test's files, and copied to ``$HPSEARCH_SCREENSHOT_DIR`` when that is set.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from fake_experiment import FakeTrial, hostile_experiment, standard_trials, write_experiment  # noqa: E402

from hpsearch.results.report import write_report  # noqa: E402

PLOTS = 6
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def _missing() -> str | None:
    """What the test needs and this machine lacks, or ``None``."""
    lacking = [
        name
        for name, found in (
            ("chromium", CHROMIUM),
            ("chromedriver", CHROMEDRIVER),
            ("selenium", importlib.util.find_spec("selenium")),
        )
        if not found
    ]
    if not lacking:
        return None
    return f"needs {', '.join(lacking)}: apt-get install chromium chromium-driver; pip install -e '.[dev]'"


MISSING = _missing()
IN_CI = bool(os.environ.get("CI"))

pytestmark = pytest.mark.skipif(MISSING is not None and not IN_CI, reason=f"no headless browser: {MISSING}")


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium driven by Selenium; under CI a missing browser fails the test instead of skipping it."""
    if MISSING is not None:
        pytest.fail(f"CI is set, so the browser test must run, but it {MISSING}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,900"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def _screenshot(driver, path: Path) -> None:
    """The whole page as a PNG at ``path`` (and in ``$HPSEARCH_SCREENSHOT_DIR`` when set)."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(max(int(height), 900), 8000))
    assert driver.save_screenshot(str(path))
    target = os.environ.get("HPSEARCH_SCREENSHOT_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / path.name)
    driver.set_window_size(1280, 900)


def _check_page(driver, page: Path, name: str, screenshot: Path) -> None:
    driver.get_log("browser")  # start from an empty console
    driver.get(page.as_uri())
    assert driver.title == f"{name}: hpsearch report"
    assert driver.find_element("tag name", "h1").text == name
    images = driver.execute_script(
        "return Array.from(document.images).map(i => [i.alt, i.complete, i.naturalWidth, i.naturalHeight]);"
    )
    assert len(images) >= PLOTS, images
    broken = [alt for alt, complete, width, height in images if not (complete and width > 0 and height > 0)]
    assert not broken, f"images that did not load: {broken}"
    assert "Could not draw" not in driver.find_element("tag name", "body").text
    _screenshot(driver, screenshot)
    errors = [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]
    assert not errors, errors


def test_the_report_of_a_search_renders_in_chromium(browser, tmp_path: Path) -> None:
    exp = write_experiment(tmp_path / "fake", standard_trials())
    page = write_report(exp)
    _check_page(browser, page, "fake", tmp_path / "report.png")
    assert (tmp_path / "report.png").read_bytes().startswith(b"\x89PNG")
    # the best trial is marked in the best-trials table, and the details open
    assert browser.find_element("css selector", "tr.best td").text == "aaaa0003"
    browser.find_element("css selector", "details summary").click()
    assert browser.find_element("css selector", "details[open] table").is_displayed()


def test_the_report_of_a_search_without_reports_renders_in_chromium(browser, tmp_path: Path) -> None:
    config = {"lr": 0.01, "hidden": 64, "layers": 2, "dropout": 0.1, "epochs": 4, "opt": {"momentum": 0.9}}
    trials = [FakeTrial("b0000001", config, [], status="running"), FakeTrial("b0000002", config, [], status="pending")]
    exp = write_experiment(tmp_path / "empty", trials, state=True)
    page = write_report(exp)
    _check_page(browser, page, "empty", tmp_path / "report_empty.png")
    text = browser.find_element("tag name", "body").text
    assert "No trial has reported yet." in text and "the search has not ended" in text


def test_the_report_of_a_hostile_folder_runs_no_script_in_chromium(browser, tmp_path: Path) -> None:
    """Every string a folder someone sent may hold (tests/fake_experiment.hostile_experiment: the search's name,
    metrics, parameters, trial ids, error text, spec) is shown as text: no alert, no script, no handler ran."""
    from selenium.common.exceptions import NoAlertPresentException

    page = write_report(hostile_experiment(tmp_path / "hostile"))
    browser.get_log("browser")  # start from an empty console
    browser.get(page.as_uri())
    for summary in browser.find_elements("css selector", "details summary"):  # what is folded away too
        summary.click()
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018 - reading it is the check: an alert() would be open
    ran = browser.execute_script(
        "return [window.hpsearchPwned === undefined, document.scripts.length,"
        " document.querySelectorAll('[onerror], [onload], [onclick]').length,"
        " Array.from(document.images).filter(i => !i.src.startsWith('data:image/png;base64,')).length];"
    )
    assert ran == [True, 0, 0, 0]
    assert "window.hpsearchPwned=5" in browser.find_element("tag name", "h1").text  # the name, shown as text
    assert "</script>" in browser.find_element("tag name", "body").text
    errors = [entry for entry in browser.get_log("browser") if entry.get("level") == "SEVERE"]
    assert not errors, errors
