"""The demo model's skills on wordings it was never trained on, with thinking on and off, on the shipped weights."""

import random
import re
from pathlib import Path

import pytest

from demo_model import corpus
from demo_model.evaluate import (HELD_OUT_TEMPLATES, HELD_OUT_UNKNOWN_UNITS, SKILL_BAR, SKILLS, Runner,
                                 held_out_skills, skill_accuracy)

CHECKPOINT = Path(__file__).resolve().parent.parent / "demo_model" / "specchat-demo"


def _pattern(template: str) -> str:
    return re.sub(r"\\\{[a-z]+\\\}", ".+?", re.escape(template))


def test_the_corpus_never_asks_in_a_held_out_wording():
    held_out = re.compile("|".join(f"(?:{_pattern(t)})" for t in HELD_OUT_TEMPLATES), re.IGNORECASE)
    unknown = re.compile(r"\b(?:" + "|".join(HELD_OUT_UNKNOWN_UNITS) + r")\b", re.IGNORECASE)
    rng = random.Random(11)
    questions = [corpus.exchange(rng, augment=rng.random() < 0.5).user for _ in range(40_000)]
    assert len(set(questions)) > 20_000
    hits = [q for q in questions if held_out.search(q) or unknown.search(q)]
    assert hits == []
    # The check can fail: a held-out wording is found when it is there.
    assert held_out.search("ok, work out 12 + 5. Thanks!") and unknown.search("How many furlongs in 3 km?")


def test_held_out_questions_cover_every_skill_and_know_their_answers():
    asked = held_out_skills(3, seed=5)
    assert [skill for skill, _ in asked] == [s for s in SKILLS for _ in range(3)]
    by_skill = {skill: ex for skill, ex in asked}
    assert by_skill["add/subtract"].reply(False) == corpus.THINK_FOR_SUMS
    assert by_skill["unknown units"].reply(True) == corpus.UNKNOWN_UNIT
    conversion = corpus.conversion(corpus.UNITS[6], corpus.UNITS[7], corpus.Decimal("2.5"), "2.5 L = ? mL")
    assert conversion.answer == "2.5 liters is 2500 milliliters."
    back = corpus.conversion(corpus.UNITS[1], corpus.UNITS[0], corpus.Decimal(5000), "convert 5000 m to kilometres")
    assert back.answer == "5000 meters is 5 kilometers."


@pytest.fixture(scope="module")
def scores():
    """Two held-out questions per skill (not the evaluation's own seed), each asked with thinking on and off."""
    return skill_accuracy(Runner(str(CHECKPOINT)), 2, seed=2024, log=lambda line: None)


# Every claim, in both modes: the shipped weights meet the bar on all of them.
CLAIMS = [pytest.param(skill, thinking, id=f"{skill}-{'on' if thinking else 'off'}")
          for skill in SKILLS for thinking in (True, False)]


@pytest.mark.parametrize("skill, thinking", CLAIMS)
def test_shipped_model_answers_held_out_wordings(scores, skill, thinking):
    right, asked = scores[(skill, thinking)]
    assert asked == 2 and right / asked >= SKILL_BAR, (skill, thinking, right, asked)
