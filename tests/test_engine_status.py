"""An engine's state, message and progress are read as one: a tab never sees one moment's state with another's
message (the state is written on the model thread and read on the web threads, at any instant)."""

from engines.fake import FakeEngine


class Observed(FakeEngine):
    """Reads the engine's info after every attribute the engine writes: what another thread could read there."""

    def __init__(self):
        self.seen = []
        super().__init__()

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        try:
            info = self.info()
        except AttributeError:  # still being built
            return
        self.seen.append((info.state, info.message))


def test_info_never_mixes_two_moments():
    engine = Observed()
    engine._set_state("loading", "loading the model", 0.1)
    engine._set_state("ready")
    engine._set_state("error", "unloaded")
    assert {("loading", "loading the model"), ("ready", ""), ("error", "unloaded")} <= set(engine.seen)
    assert set(engine.seen) <= {("loading", "waiting to load"), ("loading", "loading the model"), ("ready", ""),
                                ("error", "unloaded")}
