"""A real headless Chromium for the report.html tests (Debian's ``chromium`` and
``chromium-driver``, driven by Selenium), installed with apt-get when absent and this is
root, as the Slurm tests install their daemons (``tests/support/slurm_cluster.py``).

The browser's console is read through the driver's ``browser`` log (``goog:loggingPrefs``);
every level is kept so a test can pick the SEVERE entries (uncaught errors, failed loads).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.apt import apt_install

PACKAGES = ("chromium", "chromium-driver")
BINARIES = ("chromium", "chromedriver")


def _found() -> bool:
    return all(shutil.which(b) for b in BINARIES)


def unavailable_reason() -> str | None:
    """Why a browser cannot be had here (None: it can, possibly after installing)."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e .[test])"
    if _found():
        return None
    if os.name != "posix" or os.geteuid() != 0:
        return "chromium/chromedriver are not installed (apt-get install chromium chromium-driver as root)"
    if shutil.which("apt-get") is None:
        return "chromium/chromedriver are not installed and there is no apt-get"
    return None


def install() -> str | None:
    """``apt-get install`` chromium and its driver when absent; why it failed (None: they
    are there)."""
    return apt_install(PACKAGES, BINARIES)


@contextmanager
def headless_chromium(width: int = 1280, height: int = 1000) -> Iterator[Any]:
    """A Selenium driver of headless Chromium (quit on exit), or the reason it cannot start
    (a str) instead of the driver."""
    reason = unavailable_reason() or install()
    if reason is not None:
        yield reason
        return
    from selenium import webdriver
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for arg in (
        "--headless=new",
        "--no-sandbox",  # root in a container
        "--disable-dev-shm-usage",
        "--disable-gpu",
        f"--window-size={width},{height}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        driver = webdriver.Chrome(
            options=options, service=Service(shutil.which("chromedriver"))
        )
    except WebDriverException as exc:
        yield f"chromium did not start: {exc.msg}"
        return
    try:
        yield driver
    finally:
        driver.quit()
