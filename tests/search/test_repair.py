"""The repair rule: which narrow miss a repair step starts from."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from search import MissedCandidate, RepairSettings, choose_repair, missed_narrowly

RULE = RepairSettings()


def test_a_miss_within_the_margin_on_every_failing_config_is_narrow() -> None:
    assert missed_narrowly({"6": 1.05}, RULE)
    assert missed_narrowly({"1": 1.2, "5": 2.0}, RULE)  # the margin itself still counts


def test_a_wrong_result_an_unreported_share_or_no_failure_is_not_narrow() -> None:
    assert not missed_narrowly({"1": 1.2, "5": 2.01}, RULE)  # one config far out: wrong code
    assert not missed_narrowly({"1": 350.0}, RULE)
    assert not missed_narrowly({"1": None}, RULE)  # a shape mismatch reports no share
    assert not missed_narrowly({"1": math.inf}, RULE)
    assert not missed_narrowly({"1": math.nan}, RULE)
    assert not missed_narrowly({}, RULE)


def test_the_newest_narrow_miss_not_yet_repaired_is_chosen() -> None:
    missed = [
        MissedCandidate(sha="a", step=3, failed_shares={"6": 1.1}),
        MissedCandidate(sha="b", step=7, failed_shares={"1": 1.3}),
        MissedCandidate(sha="c", step=9, failed_shares={"1": 80.0}),
    ]
    chosen = choose_repair(missed, frozenset(), RULE)
    assert chosen is not None and chosen.sha == "b"
    chosen = choose_repair(missed, frozenset({"b"}), RULE)
    assert chosen is not None and chosen.sha == "a"
    assert choose_repair(missed, frozenset({"a", "b"}), RULE) is None
    assert choose_repair([], frozenset(), RULE) is None


def test_the_margin_is_a_setting_and_must_exceed_the_tolerance() -> None:
    wide = RepairSettings(margin=100.0)
    assert missed_narrowly({"1": 80.0}, wide) and not missed_narrowly({"1": 80.0}, RULE)
    with pytest.raises(ValidationError):
        RepairSettings(margin=1.0)
