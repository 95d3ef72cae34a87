"""Two tabs changing settings at once: the engine is asked to prepare for, and the tabs are told, the settings the
server ends up holding, in the order it applied them."""

import threading

from engines.fake import FakeEngine
from tests.support.tabs import RecordingTab
from webapp import create_app


class SlowToPrepare(FakeEngine):
    """Preparing for 11 tokens waits (bounded) until 22 was prepared for, as a thread switch might let it."""

    def __init__(self):
        super().__init__()
        self.prepared: list[int] = []
        self.second_prepared = threading.Event()

    def prepare(self, options) -> None:
        if options.max_tokens == 11:
            self.second_prepared.wait(timeout=1)
        self.prepared.append(options.max_tokens)
        if options.max_tokens == 22:
            self.second_prepared.set()


def test_crossing_settings_changes_leave_the_engine_and_the_tabs_with_the_settings_held(tmp_path):
    engine = SlowToPrepare()
    host = create_app(engine, data_dir=tmp_path).extensions["specchat"]
    tab = RecordingTab(host)
    host.join(tab)
    first = threading.Thread(target=host.update_settings, args=({"max_tokens": 11},))
    first.start()

    while first.is_alive() and host.settings.current.max_tokens != 11:
        first.join(timeout=0.01)  # the first change is applied and its prepare is under way
    other = threading.Thread(target=host.update_settings, args=({"max_tokens": 22},))
    other.start()
    first.join(timeout=10)
    other.join(timeout=10)
    held = host.settings.current.max_tokens
    assert engine.prepared[-1] == held
    assert [f["values"]["max_tokens"] for f in tab.frames if f["type"] == "settings"][-1] == held
