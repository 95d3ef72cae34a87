"""Questions that trained stages have answered wrongly, each with the reply it should get.

A new checkpoint that misses one of these misses a question a room asks, so it is worth a minute before the
draws, which take an hour (``python -m training.evaluate CHECKPOINT --parts faults``). Every question is in a
held-out wording, so that none of them is trained on; the comment after each names the stages that missed it
(training/TRAINING.md has the replies).
"""

from __future__ import annotations

from decimal import Decimal

from . import corpus


def _unit(name: str) -> corpus.Unit:
    return next(u for u in corpus.UNITS if u.name == name)


def known_faults() -> list[tuple[str, corpus.Exchange]]:
    """(class, exchange) for every question a stage got wrong, in the order of the training log."""
    mm, km, cm, minute, second = (_unit(name) for name in ("millimeter", "kilometer", "centimeter", "minute",
                                                            "second"))
    before = corpus.conversion(mm, km, Decimal(7142), "I have 7142 millimetre. How many km is that?")
    same_in_cm = corpus.conversion(mm, cm, Decimal(7142), "Tell me the same in centimeters.")
    return [
        # the word after "would" read as the word (stages 12-18), a repeated letter missed (18), a copy (30e; and
        # jacket's " j" as another letter in 34b, 35b, 36a, 37d), two letter wordings mixed in weights averaged
        # across stages (18 with 31c)
        ("letters", corpus.letters_exchange("meadow", "m", "How many m's would you say meadow has?")),
        ("letters", corpus.letters_exchange("scissors", "s", "How many s's would you say scissors has?")),
        ("letters", corpus.letters_exchange("jacket", "a", "How many a's would you say jacket has?")),
        ("letters", corpus.letters_exchange("parallel", "r", "How many r's would you say parallel has?")),
        ("word length", corpus.length_exchange("qzxdwqxpvwg", "What is the letter count of qzxdwqxpvwg?")),  # 30c
        ("compare", corpus.compare_exchange(29237, 29037, "smaller",
                                            "Which would you say is smaller, 29237 or 29037?")),  # 17, 30e
        ("add/subtract", corpus.add_exchange(5, 545, "5 plus 545 equals?")),  # 30c, 30d
        ("add/subtract", corpus.sub_exchange(352, 12, "How much is left when you take 12 from 352?")),  # 18, 32a, 34
        # the number taken away read as a copy of the other ("9104 - 9104 = 0.")
        ("add/subtract", corpus.sub_exchange(9104, 9, "9104 minus 9 equals?")),  # 35a, 36b, 37c, 38a
        # the decimal's place taken by a copy of the other number (29, 31a-c, 32a, 32b)
        ("decimals", corpus.not_whole_exchange(["0.12", "352"], "How much is left when you take 0.12 from 352?")),
        ("multiply", corpus.mul_exchange(56, 2, "56 times 2 equals?")),  # 31b, 32a, 32b
        ("multiply", corpus.mul_exchange(702, 5, "702 times 5 equals?")),  # 30e, 32b1, 32b
        ("multiply", corpus.mul_exchange(48, 7, "48 times 7 equals?")),  # 32a, 32b
        ("unknown units", corpus.unknown_unit_exchange("Change 142 hands into grams.")),  # 31b, 31c: "hours to grams"
        ("unknown units", corpus.unknown_unit_exchange("I have 55 quarts. How many hours is that?")),  # 31c
        ("follow-ups", corpus.FollowUp.after(before, same_in_cm)),  # 30c, 31c
        # "s" for seconds read as a unit it does not know, thinking off (38b: a limit)
        ("units", corpus.conversion(minute, second, Decimal(11), "I have 11 min. How many s is that?")),
        # "one" inside a word read as a number in words, thinking off (37a)
        ("other topics", corpus.Exchange("Who invented the telephone?", corpus.FALLBACK_THOUGHT, corpus.FALLBACK)),
    ]
