"""The demo model's skills and limits on wordings it was never trained on, in fresh and long chats, on the shipped weights."""

import random
import re
from decimal import Decimal

import pytest

from training import corpus
from training.evaluate import (DEEP_TURN, HELD_OUT_TEMPLATES, HELD_OUT_UNKNOWN_UNITS, HELD_OUT_WORDS, ROOM_CLASSES,
                               ROOM_TEMPLATES, SKILL_BAR, SKILLS, FollowUp, ask, chat_questions, chat_run,
                               held_out_skills, holds_reasoning, judge, outcomes, room_questions, skill_accuracy)
from training.known_faults import known_faults


def _pattern(template: str) -> str:
    return re.sub(r"\\\{[a-z]+\\\}", ".+?", re.escape(template))


# Wordings one word from the evaluation's, which the corpus keeps out too: "How many r's would you reckon trumpet
# has?", "How many r's could you say trumpet has?", "Spell out zebra and give me its length."
NEAR_HELD_OUT = [r"how many\b.*\bwould you\b", r"how many\b.*\byou say\b", r"how many\b.*\bwould\b.*\bsay\b",
                 r"tell me its length", r"spell out\b.*\bits length"]


@pytest.mark.slow
def test_the_corpus_never_asks_in_a_held_out_wording():
    templates = [f"(?:{_pattern(t)})" for t in HELD_OUT_TEMPLATES + ROOM_TEMPLATES] + NEAR_HELD_OUT
    held_out = re.compile("|".join(f"(?:^|\\W){t}" for t in templates), re.IGNORECASE)
    unknown = re.compile(r"\b(?:" + "|".join(HELD_OUT_UNKNOWN_UNITS + HELD_OUT_WORDS) + r")\b", re.IGNORECASE)
    rng = random.Random(11)
    questions = [corpus.exchange(rng, augment=rng.random() < 0.5).user for _ in range(40_000)]
    # Follow-ups only come after the turn they follow: ask whole chats too.
    questions += [ex.user for _ in range(3_000) for ex, _ in corpus.conversation(rng, 6, augment=True)]
    assert len(set(questions)) > 30_000
    assert sum(q in corpus.AGAIN for q in questions) > 100
    hits = [q for q in questions if held_out.search(q) or unknown.search(q)]
    assert hits == []
    # The check can fail: a held-out wording is found when it is there.
    assert held_out.search("ok, work out 12 + 5. Thanks!") and unknown.search("How many furlongs in 3 km?")
    assert held_out.search("Could I have that in grams?") and unknown.search("How many z's in zebra?")
    assert held_out.search("How many t's would you reckon butter has?")
    assert held_out.search("How many t's could you say butter has?")
    assert held_out.search("How many t's would they really say butter has?")
    assert held_out.search("Spell out lantern, then give me its length.")


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


def _with_words(asked: list[corpus.Exchange]) -> list[tuple[str, str]]:
    """(question in lower case, the word its reasoning spells) for each exchange that spells one."""
    spelt = [(ex.user.lower(), re.match(r"(?:Spell|Number the \S+ in) (\S+?):? ", ex.reasoning)) for ex in asked]
    return [(q, m.group(1)) for q, m in spelt if m]


def test_letter_and_length_questions_put_the_word_anywhere_and_spell_it_in_lower_case():
    rng = random.Random(3)
    asked = [corpus.count_letters(rng) for _ in range(3_000)] + [corpus.word_length(rng) for _ in range(3_000)]
    pairs = _with_words(asked)
    assert len(pairs) > 5_000 and all(w == w.lower() for _, w in pairs)
    # Each question holds its word; the word opens it, ends it and stands inside another verb.
    assert all(re.search(rf"\b{w}\b", q) for q, w in pairs)
    assert sum(q.startswith(w) for q, w in pairs) > 100
    assert sum(bool(re.search(rf"\b{w}['\"]?[?.]$", q)) for q, w in pairs) > 1_000
    assert sum(bool(re.match(rf"(spell out|write out|look at|go through|take) (the word )?['\"]?{w}\b", q))
               for q, w in pairs) > 100


def test_letter_and_length_questions_put_a_clause_before_the_word_and_ask_a_length_last():
    rng = random.Random(4)
    letters = _with_words([corpus.count_letters(rng) for _ in range(4_000)])
    lengths = _with_words([corpus.word_length(rng) for _ in range(4_000)])
    # "How many r's do you reckon trumpet has?": words of many kinds between the letter and the word, so that
    # the word is what the clause is about, not the word after the letter.
    for pairs in (letters, lengths):
        clauses = [m.group(1) for q, w in pairs
                   if (m := re.match(rf"how many (?:[a-z]'?s|letters [a-z]|letters) ((?:[a-z]+ ){{2,}})(?:the "
                                     rf"(?:word|name|string) )?['\"]?{w}['\"]? (?:has|contains|holds)\b", q))]
        assert len(clauses) > 60 and len(set(clauses)) > 20
    # A length asked last, after a verb, with no "letters" to name: "Write out zebra and give me its length."
    length_last = re.compile(r"\b(?:its length|how long it is|the length of it|its size in letters)\b[^.?]*[.?]$")
    assert sum(bool(length_last.search(q)) for q, _ in lengths) > 150
    assert not any(length_last.search(q) for q, _ in letters)
    # A letter count after the same verbs names the letter: "Write out zebra and count the letter l."
    assert sum(bool(re.search(r"\b(?:and|then) .*\bthe letter [a-z]\b", q)) for q, _ in letters) > 50


def test_words_begin_with_rare_letters_and_lengths_are_asked_of_the_word_right_after_of():
    from training import probe_words

    rng = random.Random(8)
    tokenizer = probe_words.demo_tokenizer()
    firsts = [probe_words.first_token(tokenizer, corpus.any_word(rng)) for _ in range(6_000)]
    # "jacket" is " j" + "ack" + "et": each rare letter opens 1 word in 100 as a token of its own (" x" and " u"
    # 1 in 200 without RARE_INITIALS), together 1 in 10 (1 in 13 without)
    opening = {c: firsts.count("Ġ" + c) for c in corpus.RARE_INITIALS}
    assert min(opening.values()) > 6_000 / 100 and sum(opening.values()) > 6_000 / 10
    lengths = _with_words([corpus.word_length(rng) for _ in range(4_000)])
    after_of = [w for q, w in lengths if re.search(rf"\bof {w}\b", q)]
    assert len(after_of) > 4_000 * 0.5 * 8 / 35 * 0.7
    # half of them open with a word of their own ("What is the length of mever?"): 1 in 11 of the others
    clause_starts = corpus.clause_word_starts()
    with_a_word = [probe_words.first_token(tokenizer, w)[1:] in clause_starts for w in after_of]
    assert sum(with_a_word) > len(after_of) * 0.4


def test_a_follow_up_to_a_new_metric_unit_often_goes_without_thinking():
    rng = random.Random(6)
    new_unit = []
    for _ in range(4_000):
        chat = corpus.conversation(rng, 6, augment=True)
        for (before, _), (ex, thinking) in zip(chat, chat[1:]):
            if before.topic and ex.topic and ex.topic[0].kind != "time":
                (frm, to, amount), (new_frm, new_to, new_amount) = before.topic, ex.topic
                if new_frm is frm and new_amount == amount and new_to is not to:
                    factor = max(frm.size, new_to.size) // min(frm.size, new_to.size)
                    new_unit.append((factor, new_to.size < frm.size, thinking))
    # mm to cm after mm to m: mostly a factor of 10, 100 or 1000, in both directions, mostly without thinking.
    near = [thinking for factor, _, thinking in new_unit if factor <= 1000]
    assert len(near) > 2 * (len(new_unit) - len(near)) and 0.55 < near.count(False) / len(near) < 0.75
    assert {(factor, smaller) for factor, smaller, thinking in new_unit if not thinking} >= {
        (f, s) for f in (10, 100, 1000) for s in (True, False)}


def test_a_screen_of_one_room_class_asks_what_the_whole_draw_asks_of_it():
    letters = "letters, any word"
    screen = room_questions(3, seed=5, classes=[letters])
    assert [skill for skill, _ in screen] == [letters] * 3
    assert [ex.user for _, ex in screen] == [ex.user for skill, ex in room_questions(3, seed=5) if skill == letters]


def test_room_questions_know_their_answers():
    asked = dict(room_questions(1, seed=5))
    assert list(asked) == ROOM_CLASSES
    assert asked["percentages"].reply(True) == corpus.PERCENT
    assert asked["decimals, negatives"].reply(False) == corpus.WHOLE_ONLY
    follow_up = asked["follow-ups"]
    assert isinstance(follow_up, FollowUp) and follow_up.before.topic
    # A letter count in a word the corpus never lists is worked out from the word asked, letter by letter, spelt
    # in lower case with the running count after each letter asked for, in reasoning that starts otherwise than a
    # word length's; the answer names the word as it was asked.
    ex = corpus.letters_exchange("Xylophone", "o", "In the word Xylophone, how many o's are there?")
    assert ex.reasoning.startswith("Number the o's in xylophone: x, y, l, o 1, p, h, o 2, n, e.")
    assert ex.answer == "There are 2 o's in Xylophone."
    assert "s 1, c, i, s 2, s 3, o, r, s 4." in corpus.letters_exchange("scissors", "s", "?").reasoning
    assert corpus.letters_exchange("goblin", "z", "?").reasoning.startswith("Number the z's in goblin: g, o,")
    # a word length names the word after a space, as the question does, never first in the sentence
    assert corpus.length_exchange("walrus", "?").answer == "The word walrus has 6 letters."
    # the reasoning ends with the answer, the word in lower case, so the answer copies the line above it
    assert ex.reasoning.endswith("\nThere are 2 o's in xylophone.")
    length = corpus.length_exchange("Walrus", "?")
    assert length.reasoning.endswith("w 1, a 2, l 3, r 4, u 5, s 6.\nThe word walrus has 6 letters.")
    chat = chat_questions(random.Random(1), 20)
    assert len({skill for skill, _, _ in chat}) >= 10 and any(th for *_, th in chat) and not all(th for *_, th in chat)


def test_judge_tells_right_from_an_honest_limit_from_a_wrong_answer():
    ex = corpus.add_exchange(12, 30, "Work out 12 + 30.")
    assert judge("...\n</think>\n\n12 + 30 = 42.", ex, True) == "right"
    assert judge("12 + 30 = 43.", ex, True) == "wrong"
    assert judge(corpus.THINK_FOR_SUMS, ex, False) == "right"
    assert judge(corpus.WHOLE_ONLY, ex, True) == "honest"
    assert judge("<think>x</think>\n\n" + corpus.THINK_FOR_SUMS, ex, False) == "wrong"  # reasoning with thinking off
    kinds = "I can't convert meters to grams: meters measure length and grams measure mass."
    assert judge(kinds, ex, True) == "honest"
    # a word length is right only for the word asked, in the corpus's wording
    length = corpus.length_exchange("anchor", "What is the letter count of anchor?")
    assert judge("The word anchor has 6 letters.", length, True) == "right"
    assert judge("The word ange has 6 letters.", length, True) == judge("anchor has 6 letters.", length, True) == "wrong"
    assert judge("The word anchor has 6 letters.", length, False) == "wrong"  # thinking off: the advice to turn it on


def test_a_thinking_off_reply_holds_reasoning_only_beyond_its_own_words():
    by_name = {unit.plural: unit for unit in corpus.UNITS}
    kinds = corpus.conversion(by_name["weeks"], by_name["milliliters"], Decimal(17), "Put 17 weeks to mL.")
    assert kinds.reasoning in kinds.answer  # the answer says its reasoning's one line itself
    assert not holds_reasoning(kinds.answer, kinds)
    assert holds_reasoning(f"<think>\n{kinds.reasoning}\n</think>\n\n{kinds.answer}", kinds)
    length = corpus.length_exchange("anchor", "What is the letter count of anchor?")
    assert holds_reasoning(length.reasoning.splitlines()[0] + "\n" + length.answer, length)
    assert not holds_reasoning(length.reply(False), length)
    assert holds_reasoning("Add 5 and 545 column by column, starting from the ones.", None)
    assert not holds_reasoning(corpus.THINK_FOR_SUMS, None)


def test_known_faults_are_held_out_questions_with_their_right_replies():
    asked = known_faults()
    held_out = re.compile("|".join(f"(?:{_pattern(t)})" for t in HELD_OUT_TEMPLATES + ROOM_TEMPLATES), re.IGNORECASE)
    questions = [ex.user for _, ex in asked] + [ex.before.user for _, ex in asked if isinstance(ex, FollowUp)]
    assert len(questions) == len(asked) + 1 and all(held_out.fullmatch(q) for q in questions), questions
    replies = {ex.user: ex.reply(True) for _, ex in asked}
    assert replies["How many s's would you say scissors has?"] == "There are 4 s's in scissors."
    assert replies["56 times 2 equals?"] == "56 × 2 = 112."
    assert replies["9104 minus 9 equals?"] == "9104 - 9 = 9095."
    assert replies["How much is left when you take 0.12 from 352?"] == corpus.WHOLE_ONLY
    assert replies["Tell me the same in centimeters."] == "7142 millimeters is 714.2 centimeters."


@pytest.mark.slow
def test_the_known_faults_screen_asks_a_follow_up_after_its_conversion_and_the_shipped_weights_pass_it(demo_runner):
    missed = []
    counts = outcomes(demo_runner, known_faults(), log=missed.append)
    assert counts[("follow-ups", True)]["right"] == counts[("follow-ups", False)]["right"] == 1
    # Every question of the screen, in both modes; the shipped weights (stage 38b) get none wrong
    # (demo_model/README.md), where stage 36a copied "jacket" as "xacket".
    assert sum(sum(c.values()) for c in counts.values()) == 2 * len(known_faults())
    assert sum(c["wrong"] for c in counts.values()) == 0, missed


@pytest.fixture(scope="module")
def scores(demo_runner):
    """Two held-out questions per skill (not the evaluation's own seed), each asked with thinking on and off."""
    return skill_accuracy(demo_runner, 2, seed=2024, log=lambda line: None)


# The shipped weights (stage 38b) meet the bar on the evaluation's ten questions per skill in both modes, in both
# draws measured in demo_model/README.md, but for units with thinking off in the second draw: "I have 11 min. How
# many s is that?" gets the limit for a unit it does not know (9 of 10).
SKILLS_NOT_AT_THE_BAR = {("units", False)}
# Every other claim, in both modes: the shipped weights meet the bar on all of them.
CLAIMS = [pytest.param(skill, thinking, id=f"{skill}-{'on' if thinking else 'off'}")
          for skill in SKILLS for thinking in (True, False) if (skill, thinking) not in SKILLS_NOT_AT_THE_BAR]


@pytest.mark.slow
@pytest.mark.parametrize("skill, thinking", CLAIMS)
def test_shipped_model_answers_held_out_wordings(scores, skill, thinking):
    right, asked = scores[(skill, thinking)]
    assert asked == 2 and right / asked >= SKILL_BAR, (skill, thinking, right, asked)


@pytest.fixture(scope="module")
def room(demo_runner):
    """Two held-out questions per class a room tries first, each asked with thinking on and off."""
    return outcomes(demo_runner, room_questions(2, seed=2024), log=lambda line: None)


# Where the shipped weights are not at the bar on the evaluation's 20 questions (demo_model/README.md): stage 38b
# meets it in every class and mode in both draws measured.
NOT_AT_THE_BAR: set[tuple[str, bool]] = set()
ROOM_CLAIMS = [pytest.param(skill, thinking, id=f"{skill}-{'on' if thinking else 'off'}")
               for skill in ROOM_CLASSES for thinking in (True, False) if (skill, thinking) not in NOT_AT_THE_BAR]


@pytest.mark.slow
@pytest.mark.parametrize("skill, thinking", ROOM_CLAIMS)
def test_shipped_model_is_never_confidently_wrong_where_a_room_goes(room, skill, thinking):
    counts = room[(skill, thinking)]
    assert sum(counts.values()) == 2 and counts["wrong"] == 0, (skill, thinking, counts)


@pytest.mark.slow
def test_a_long_chat_is_answered_as_well_at_its_end_as_at_its_start(demo_runner):
    """Twelve questions in one chat, each reply the model's own and kept with its reasoning, as specchat keeps it:
    the last two are answered as they are in a fresh chat, and no claimed class gets a wrong answer."""
    seed, turns = 2024, DEEP_TURN + 2
    results = chat_run(demo_runner, 1, turns, seed=seed, log=lambda line: None)
    assert [turn for turn, *_ in results] == list(range(turns))
    claimed = {(s, t) for s in SKILLS + ROOM_CLASSES for t in (True, False)} - NOT_AT_THE_BAR - SKILLS_NOT_AT_THE_BAR
    assert [r for _, skill, thinking, r in results if r == "wrong" and (skill, thinking) in claimed] == []
    asked = chat_questions(random.Random(f"{seed}:chat:0"), turns)
    for turn, skill, thinking, deep in results[DEEP_TURN:]:
        _, ex, _ = asked[turn]
        assert deep == judge(ask(demo_runner, ex, thinking), ex, thinking), (turn, skill, ex.user)
