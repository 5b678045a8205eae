"""The chain's anchors outside the database: the head journal, the last verified head and an
expected head catch what the chain alone cannot (truncation, rewrites with recomputed hashes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ledger import ExpectedHead, JournalPolicy, Ledger, ProblemKind
from tests.ledger import factories
from tests.ledger.tampering import delete_last, edit_in_place, rewrite_and_rehash


def three_batches(ledger: Ledger) -> list[tuple[int, str]]:
    """Append 10 events in batches of 4, 3 and 3; returns the head after each batch."""
    heads = []
    for start, stop in ((0, 4), (4, 7), (7, 10)):
        ledger.append_many([factories.event(n=n) for n in range(start, stop)])
        heads.append(ledger.head())
    return heads


def journal_lines(ledger: Ledger) -> list[dict[str, object]]:
    assert ledger.anchor_files is not None
    text = ledger.anchor_files.journal.read_text()
    return [json.loads(line) for line in text.splitlines()]


def test_every_committed_batch_appends_its_head_to_the_journal(
    ledger: Ledger, ledger_path: Path
) -> None:
    heads = three_batches(ledger)
    ledger.append(factories.fingerprint())
    ledger.append(factories.fingerprint())  # stored already: nothing written, no journal line
    heads.append(ledger.head())
    assert ledger.anchor_files is not None
    assert ledger.anchor_files.journal == ledger_path.with_name("ledger.sqlite.heads")
    assert [(line["seq"], line["hash"]) for line in journal_lines(ledger)] == heads
    report = ledger.verify()
    assert report.ok and report.journal_heads == 4 and report.anchor_note is None


def test_deleting_the_last_entries_behind_restored_triggers_is_caught(
    ledger: Ledger, ledger_path: Path
) -> None:
    three_batches(ledger)
    delete_last(ledger_path, 3)
    with Ledger.open_path(ledger_path, create=False, journal=JournalPolicy.OFF) as unanchored:
        blind = unanchored.verify()
    assert blind.ok and blind.anchor_note is not None  # the chain alone cannot see it
    report = ledger.verify()
    assert not report.ok
    assert report.problem_kind is ProblemKind.TRUNCATED
    assert report.first_bad_seq == 8
    assert report.problem is not None
    assert "ends at entry 7" in report.problem and "entry 10" in report.problem


def test_a_rewrite_with_recomputed_hashes_is_caught_by_the_journal(
    ledger: Ledger, ledger_path: Path
) -> None:
    three_batches(ledger)
    rewrite_and_rehash(ledger_path, 5, {"payload": {"n": 999}})
    with Ledger.open_path(ledger_path, create=False, journal=JournalPolicy.OFF) as unanchored:
        assert unanchored.verify().ok  # internally consistent again
    report = ledger.verify()
    assert report.problem_kind is ProblemKind.REWRITTEN
    assert report.first_bad_seq == 7  # the first journal head at or after the rewrite
    assert report.problem is not None
    assert "after entry 4 and at or before entry 7" in report.problem


def test_expect_head_catches_a_rewrite_without_any_journal(
    ledger_path: Path,
) -> None:
    with Ledger.open_path(ledger_path, journal=JournalPolicy.OFF) as ledger:
        heads = three_batches(ledger)
        seq, head_hash = heads[1]
        assert ledger.verify(ExpectedHead(seq=seq, hash=head_hash)).ok
        assert ledger.verify(ExpectedHead.parse(head_hash)).ok  # HASH alone: anywhere
        rewrite_and_rehash(ledger_path, 2, {"payload": {"n": -1}})
        report = ledger.verify(ExpectedHead.parse(f"{seq}:{head_hash}"))
    assert report.problem_kind is ProblemKind.EXPECTED_HEAD
    assert report.first_bad_seq == 7
    assert report.problem is not None and f"not the expected {head_hash}" in report.problem


def test_expect_head_past_the_end_or_nowhere_fails(ledger: Ledger, ledger_path: Path) -> None:
    heads = three_batches(ledger)
    delete_last(ledger_path, 3)
    with Ledger.open_path(ledger_path, create=False, journal=JournalPolicy.OFF) as unanchored:
        past = unanchored.verify(ExpectedHead(seq=heads[2][0], hash=heads[2][1]))
        nowhere = unanchored.verify(ExpectedHead(seq=None, hash=heads[2][1]))
    assert past.problem_kind is ProblemKind.EXPECTED_HEAD and past.first_bad_seq == 8
    assert nowhere.problem_kind is ProblemKind.EXPECTED_HEAD and nowhere.first_bad_seq is None


@pytest.mark.parametrize("text", ["", "12", "x:" + "a" * 64, "0:" + "a" * 64, "3:abc"])
def test_a_malformed_expected_head_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="is not SEQ:HASH or HASH"):
        ExpectedHead.parse(text)


def test_a_journal_behind_the_database_is_fine(ledger: Ledger) -> None:
    three_batches(ledger)
    assert ledger.anchor_files is not None
    journal = ledger.anchor_files.journal
    # A crash between the commit and the journal write loses the last line; a crash inside
    # the write leaves part of it.
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(lines[:-1]) + lines[-1][:20])
    assert ledger.verify().ok
    ledger.append(factories.event(n=10))  # the next line starts on a line of its own
    report = ledger.verify()
    assert report.ok and report.journal_heads == 4  # 4, 7, 11 and the verified head 10
    assert report.anchor_note is not None and "1 unreadable line" in report.anchor_note


def test_a_journal_deleted_or_cut_after_a_verification_is_caught(ledger: Ledger) -> None:
    three_batches(ledger)
    assert ledger.verify().ok  # the checkpoint now holds how much journal was verified
    assert ledger.anchor_files is not None
    journal = ledger.anchor_files.journal
    text = journal.read_text()
    journal.write_text(text.splitlines(keepends=True)[0])
    assert ledger.check().problem_kind is ProblemKind.JOURNAL
    journal.unlink()
    report = ledger.verify()
    assert report.problem_kind is ProblemKind.JOURNAL
    assert report.problem is not None and "is gone" in report.problem


def test_a_journal_deleted_when_only_a_checkpoint_before_it_exists_is_caught(
    ledger: Ledger,
) -> None:
    # A run checks its fresh ledger (checkpoint, no journal bytes yet), appends its whole
    # search, and stops; the journal is then deleted before anyone verified it.
    assert ledger.check().ok
    three_batches(ledger)
    assert ledger.anchor_files is not None
    ledger.anchor_files.journal.unlink()
    for report in (ledger.check(), ledger.verify()):
        assert report.problem_kind is ProblemKind.JOURNAL, report
        assert report.problem is not None and "is gone" in report.problem


def test_two_hashes_for_one_seq_in_the_journal_are_caught(ledger: Ledger) -> None:
    heads = three_batches(ledger)
    assert ledger.anchor_files is not None
    with ledger.anchor_files.journal.open("a") as journal:
        journal.write(json.dumps({"seq": heads[0][0], "hash": "f" * 64}) + "\n")
    report = ledger.verify()
    assert report.problem_kind is ProblemKind.JOURNAL and report.first_bad_seq == 4


def test_the_incremental_check_reads_only_the_entries_after_the_verified_head(
    ledger: Ledger, ledger_path: Path
) -> None:
    three_batches(ledger)
    first = ledger.check()  # no checkpoint yet: a full check
    assert (first.ok, first.checked_from_seq, first.entries_checked) == (True, 1, 10)
    ledger.append_many([factories.event(n=n) for n in range(10, 13)])
    second = ledger.check()
    assert (second.ok, second.checked_from_seq, second.entries_checked) == (True, 11, 3)
    assert second.head_seq == 13
    # An old entry edited without rehashing is not read again (it is the full verify's job)...
    edit_in_place(ledger_path, 3, {"payload": {"n": 777}})
    third = ledger.check()
    assert (third.ok, third.entries_checked) == (True, 0)
    # ...which finds it.
    full = ledger.verify()
    assert full.problem_kind is ProblemKind.CHAIN and full.first_bad_seq == 3


def test_the_incremental_check_still_sees_a_rewrite_of_the_verified_head(
    ledger: Ledger, ledger_path: Path
) -> None:
    three_batches(ledger)
    assert ledger.check().ok
    rewrite_and_rehash(ledger_path, 1, {"payload": {"n": 5}})
    report = ledger.check()  # the journal was compared already: the verified head catches it
    assert (report.problem_kind, report.first_bad_seq) == (ProblemKind.REWRITTEN, 10)
    assert report.problem is not None and "the last verification (on" in report.problem
    assert report.entries_checked == 0


def test_the_incremental_check_sees_deleted_entries(ledger: Ledger, ledger_path: Path) -> None:
    three_batches(ledger)
    assert ledger.check().ok
    delete_last(ledger_path, 2)
    report = ledger.check()
    assert report.problem_kind is ProblemKind.TRUNCATED and report.first_bad_seq == 9


def test_a_ledger_without_a_journal_says_what_it_cannot_prove() -> None:
    with Ledger.open("sqlite://") as ledger:
        ledger.append_many(factories.one_of_each())
        report = ledger.verify()
    assert report.ok and report.journal is None
    assert report.anchor_note is not None and "not a local SQLite file" in report.anchor_note


def test_an_explicit_journal_path_is_used(tmp_path: Path) -> None:
    journal = tmp_path / "elsewhere" / "heads.jsonl"
    journal.parent.mkdir()
    with Ledger.open("sqlite://", journal=journal) as ledger:
        ledger.append_many(factories.one_of_each())
        assert ledger.verify().ok
    assert json.loads(journal.read_text())["seq"] == 6
    assert (tmp_path / "elsewhere" / "heads.jsonl.verified").exists()
