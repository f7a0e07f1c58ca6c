#!/usr/bin/env python3
"""How fast `chorus report` pages open (docs/report.md, "Large algorithms").

Loads each page in Debian's chromium (headless, through python3-selenium and
chromium-driver) three times and prints when the viewer finished drawing
(performance.now() from navigation start, the best of 3), then the time a
rank filter and a time-slider move take, and the console errors seen.
Usage: bench/report_open.py PAGE.html...
"""
import os
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service


def main():
    o = Options()
    o.binary_location = "/usr/bin/chromium"
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"]:
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
    try:
        for path in sys.argv[1:]:
            drawn = min(load(d, path) for _ in range(3))
            errors = [e for e in d.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
            filt = timed(d, "const e = document.querySelector('.filter-rank');"
                            "if (e) { e.value = '0-3'; e.dispatchEvent(new Event('input')); }")
            slide = timed(d, "const e = document.querySelector('.time-slider');"
                             "if (e) { e.value = '10'; e.dispatchEvent(new Event('input')); }")
            print(f"{path}: drawn {drawn} ms, rank filter {filt:.0f} ms, slider {slide:.0f} ms, "
                  f"console errors {len(errors)}")
    finally:
        d.quit()


def load(d, path):
    d.get("file://" + os.path.abspath(path))
    return int(d.execute_script("return document.body.getAttribute('data-render-ms')"))


def timed(d, script):
    t0 = time.time()
    d.execute_script(script)
    return (time.time() - t0) * 1000


if __name__ == "__main__":
    main()
