"""Busy-machine detection (busy.py): CPU burners the test starts (one per core, stopped by the test) make a
measurement busy; this process's own work does not; on macOS the load average stands in for /proc/stat. Others may
load the machine too, so each busy reading is compared with a reading taken without the burners in the same test."""

import contextlib
import hashlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from tests.support.wsclient import WsClient
from webapp.measurement.busy import THRESHOLD, CpuWatch, describe, percent, summary

BURN_S = 60  # each burner ends itself after this, should the test not get to stop it
SPIN = f"import time\nend = time.monotonic() + {BURN_S}\nwhile time.monotonic() < end:\n    pass\n"


@contextlib.contextmanager
def burners():
    """One CPU-bound process per core, for the block's length."""
    started = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(os.cpu_count() or 1)]
    try:
        time.sleep(0.3)  # running before the measurement starts
        yield
    finally:
        for process in started:
            process.kill()
            process.wait(timeout=10)


def assert_the_burners_show(busy: dict, quiet: dict) -> None:
    """A server's reading taken with the burners is flagged and, where the reading without them left room, no lower
    beyond a few ticks. On a machine that other work already filled (90% or more without the burners) a reading is
    100% less the server's own share, which its work moves by several points, so there the comparison would only
    measure that share."""
    assert busy["flagged"] is True
    if quiet["percent"] < 90:
        assert busy["percent"] >= quiet["percent"] - 5
    assert quiet["flagged"] is (quiet["percent"] > THRESHOLD * 100)


def watched(seconds: float) -> dict:
    watch = CpuWatch()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.05)
    return watch.result()


def test_burners_on_every_core_make_a_measurement_busy():
    quiet = watched(1.5)
    with burners():
        busy = watched(1.5)
    assert set(busy) == {"percent", "flagged", "threshold"} and busy["threshold"] == round(THRESHOLD * 100)
    # Every core burnt: at least three quarters went to other work, and no less than without the burners
    # (but for a few ticks where other work had already filled the machine).
    assert busy["flagged"] is True and busy["percent"] >= 75 and busy["percent"] >= quiet["percent"] - 5
    assert quiet["flagged"] is (quiet["percent"] > THRESHOLD * 100)
    assert describe(busy) == (f"The machine was busy: {percent(busy)}% of the CPU went to other work, "
                              "so these numbers are not representative.")
    assert describe({**busy, "flagged": False}) is None and describe(None) is None


def test_the_flag_agrees_with_the_percentage_shown():
    at = THRESHOLD * 100
    assert summary(THRESHOLD + 0.00004) == {"percent": at, "flagged": False, "threshold": round(at)}
    assert summary(THRESHOLD + 0.0006) == {"percent": round(at + 0.1, 1), "flagged": True, "threshold": round(at)}
    assert summary(0.0)["flagged"] is False and summary(1.0) == {"percent": 100.0, "flagged": True, "threshold": round(at)}


@contextlib.contextmanager
def spinning_on_every_core():
    """This process's own threads, four a core, busy for the block's length (hashing releases the GIL)."""
    stop = threading.Event()

    def spin() -> None:
        block = bytes(1 << 20)
        while not stop.is_set():
            hashlib.sha256(block).digest()

    threads = [threading.Thread(target=spin, daemon=True) for _ in range(4 * (os.cpu_count() or 1))]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=10)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/stat")
def test_this_processs_own_work_is_not_other_work():
    """Other work and this process's share of the CPU add up to at most all of it, however loaded the machine."""
    def machine_s() -> float:
        return sum(map(int, Path("/proc/stat").read_text().split()[1:9])) / os.sysconf("SC_CLK_TCK")

    def own_share() -> float:
        return 100 * (sum(os.times()[:2]) - own) / max(machine_s() - total, 1e-9)

    # Spin for 1.5 s, and on while this process has had too little CPU time to count. A loaded machine gives each
    # runnable thread its turn, so this process's share grows with its threads, not with time: one thread among a
    # dozen other busy processes on two cores kept under 5% however long it spun.
    with spinning_on_every_core():
        total, own, started = machine_s(), sum(os.times()[:2]), time.monotonic()
        watch = CpuWatch()
        while time.monotonic() - started < 1.5 or (own_share() <= 6 and time.monotonic() - started < 30):
            time.sleep(0.01)
        spun, share = watch.result(), own_share()
    assert share > 5  # this process had CPU time to count
    assert spun["percent"] <= 100 - share + 2  # rounding and the readings' few ticks apart


@pytest.mark.parametrize("load, cores, spin", [
    (1.5, 2, False),  # one and a half cores' worth of other work on two: 75%, flagged
    (0.2, 2, False),  # 10%, not flagged
    (1.0, 1, True),  # the load is this process spinning: not other work
])
def test_elsewhere_the_load_average_less_this_processs_own_rate_is_other_work(monkeypatch, load, cores, spin):
    """macOS has no /proc/stat: busy.py takes the load average there. Here the platform and the load it reports are
    set; the arithmetic and this process's own CPU time are real."""
    from webapp.measurement import busy

    monkeypatch.setattr(busy.sys, "platform", "darwin")
    monkeypatch.setattr(busy.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(busy.os, "cpu_count", lambda: cores)
    own, wall = sum(os.times()[:2]), time.monotonic()
    watch = CpuWatch()
    end = time.monotonic() + 0.6
    while time.monotonic() < end:
        if not spin:
            time.sleep(0.02)
    result = watch.result()
    own_rate = (sum(os.times()[:2]) - own) / (time.monotonic() - wall)
    expected = 100 * min(max((load - own_rate) / cores, 0.0), 1.0)
    assert abs(result["percent"] - expected) <= 3, (result, expected)
    if not spin:
        assert result["flagged"] is (load / cores > THRESHOLD) and abs(result["percent"] - 100 * load / cores) <= 3
    else:
        assert own_rate > 0.05 and result["percent"] <= 100 * (1 - own_rate) + 3  # its own spinning is not counted


def test_a_race_on_a_busy_machine_says_so_and_a_quiet_one_does_not(fake_server):
    with WsClient(fake_server.ws_url) as ws:
        ws.send({"type": "race", "id": "quiet", "text": "hello", "runs": 2})
        quiet, _ = ws.until("race_done", timeout=60, id="quiet")
        with burners():
            ws.send({"type": "race", "id": "busy", "text": "hello", "runs": 2})
            busy, _ = ws.until("race_done", timeout=120, id="busy")
    assert_the_burners_show(busy["busy"], quiet["busy"])
    for summary in (quiet, busy):
        receipt = requests.get(fake_server.url + summary["receipt"]).json()["receipt"]
        assert receipt["busy"] == summary["busy"]
        page = requests.get(fake_server.url + summary["receipt"], params={"format": "markdown"}).text
        warned = f"The machine was busy: {percent(summary['busy'])}% of the CPU went to other work" in page
        assert warned is summary["busy"]["flagged"]
    baseline = requests.get(fake_server.url + "/api/baseline").json()["baseline"]
    assert baseline["busy"] == busy["busy"] and baseline["spread"] == busy["off"]["tok_s"]
    assert baseline["prompt_tokens"] == busy["off"]["stats"]["prompt_tokens"] > 0


def test_a_chat_replys_stats_say_how_busy_the_machine_was(fake_server):
    engine = fake_server.host.engine
    fast, engine.delay_s = engine.delay_s, 0.15  # replies of about a second: enough clock ticks for a steady reading
    try:
        with WsClient(fake_server.ws_url) as ws:
            quiet = ws.chat("quiet")[0]["stats"]["busy"]
            with burners():
                busy = ws.chat("busy")[0]["stats"]["busy"]
    finally:
        engine.delay_s = fast
    assert_the_burners_show(busy, quiet)


def test_a_calibration_on_a_busy_machine_says_so_in_its_baseline(fake_server):
    quiet = requests.post(fake_server.url + "/api/calibrate").json()["baseline"]
    with burners():
        busy = requests.post(fake_server.url + "/api/calibrate").json()["baseline"]
    assert quiet["source"] == busy["source"] == "calibration"
    assert_the_burners_show(busy["busy"], quiet["busy"])
    assert requests.get(fake_server.url + "/api/baseline").json()["baseline"]["busy"] == busy["busy"]
