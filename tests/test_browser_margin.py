"""In Chromium: a race whose greedy lanes parted says how near a tie it was, instead of a bare "differ"."""

import pytest

from tests.support.browser import evaluate, summary_frame


pytestmark = pytest.mark.browser

SAID = """(m, frame) => {
  const el = document.createElement("div");
  m.renderRaceSummary(el, frame);
  return el.querySelector(".race-identical").textContent;
}"""
DIFFER = "Outputs differ from character 12: off “ the cache”, on “ a cache”"


@pytest.mark.parametrize("margin, said", [
    (0.094, f"{DIFFER}. A near-tie (margin 0.094) rounded differently; both continuations are greedy."),
    (2.5, f"{DIFFER}. The target's top two logits there are 2.50 apart."),
    (None, DIFFER),  # a sampled race, or an engine that cannot tell
])
def test_a_parted_race_says_how_near_a_tie_it_was(tab, margin, said):
    tab.open()
    divergence = {"index": 12, "off": " the cache", "on": " a cache", "margin": margin}
    frame = summary_frame(identical=False, first_divergence=divergence)
    assert evaluate(tab, "race-summary.js", SAID, frame) == said
