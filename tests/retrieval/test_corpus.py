"""The corpus loader refuses any file whose clause hashes or version disagree with its content, naming the clause."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from countersign.retrieval import CorpusError, load_corpus
from countersign.retrieval.corpus import Clause, ClauseCorpus, parse_corpus
from tests.retrieval.corpus_files import (
    REAL_CORPUS,
    clause_sha256,
    corpus_version,
    rehash,
    small_corpus_document,
    write_corpus,
)


def load_document(tmp_path: Path, document: dict[str, Any]) -> ClauseCorpus:
    return load_corpus(write_corpus(tmp_path / "corpus.json", document))


def test_a_well_formed_corpus_loads_with_its_version_and_every_clause(tmp_path: Path) -> None:
    document = small_corpus_document()

    corpus = load_document(tmp_path, document)

    assert corpus.version == document["version"]
    assert [clause.id for clause in corpus.clauses] == [clause["id"] for clause in document["clauses"]]
    assert corpus.clause("CSE-7.2").sha256 == clause_sha256(document["clauses"][9])
    assert corpus.form_codes == {"CSB", "CSE"}
    assert (corpus.profile, corpus.seed) == ("clauses", 7)


def test_tampered_text_under_the_old_hash_is_refused_naming_the_clause(tmp_path: Path) -> None:
    document = small_corpus_document()
    document["clauses"][1]["text"] = document["clauses"][1]["text"].replace("three", "thirty")

    with pytest.raises(CorpusError) as caught:
        load_document(tmp_path, document)

    assert caught.value.clause_id == "CSB-4.2"
    assert "sha256" in str(caught.value) and "CSB-4.2" in str(caught.value)


def test_tampered_hash_is_refused_naming_the_clause(tmp_path: Path) -> None:
    document = small_corpus_document()
    document["clauses"][10]["sha256"] = "0" * 64
    document["version"] = corpus_version(document["clauses"])  # even with a version that matches the new hash

    with pytest.raises(CorpusError) as caught:
        load_document(tmp_path, document)

    assert caught.value.clause_id == "CSE-7.3"
    assert "sha256 is " + "0" * 64 in str(caught.value)


def test_tampered_version_is_refused(tmp_path: Path) -> None:
    document = small_corpus_document()
    document["version"] = "f" * 64

    with pytest.raises(CorpusError, match=r"version is 'f{64}' but the clauses hash to"):
        load_document(tmp_path, document)


def test_a_dropped_clause_changes_the_version_and_is_refused(tmp_path: Path) -> None:
    document = small_corpus_document()
    del document["clauses"][3]

    with pytest.raises(CorpusError, match="version is"):
        load_document(tmp_path, document)


def test_an_honest_edit_with_rehashed_clause_and_version_loads_under_a_new_version(tmp_path: Path) -> None:
    original = small_corpus_document()
    edited = copy.deepcopy(original)
    edited["clauses"][1]["text"] += " Retention is held in trust."

    corpus = load_document(tmp_path, rehash(edited))

    assert corpus.version != original["version"]
    assert corpus.clause("CSB-4.2").sha256 != original["clauses"][1]["sha256"]


@pytest.mark.parametrize(
    ("edit", "clause_id", "problem"),
    [
        (lambda c: c.update(id="CSX-4.1"), "CSX-4.1", "id does not match"),
        (lambda c: c.update(form="CSE"), "CSB-4.1", "does not start with its form"),
        (lambda c: c.update(id="CSD-4.1", form="CSD"), "CSD-4.1", "not one of the corpus's forms"),
        (lambda c: c.update(number="4.9"), "CSB-4.1", "number '4.9' disagrees with the id"),
        (lambda c: c.update(sha256="ABC"), "CSB-4.1", "64 lower-case hex"),
        (lambda c: c.pop("title"), "CSB-4.1", "missing or empty string fields: title"),
        (lambda c: c.update(text=""), "CSB-4.1", "missing or empty string fields: text"),
    ],
)
def test_a_malformed_clause_is_refused_naming_it_and_the_field(
    tmp_path: Path, edit: Any, clause_id: str, problem: str
) -> None:
    document = small_corpus_document()
    edit(document["clauses"][0])

    with pytest.raises(CorpusError) as caught:
        load_document(tmp_path, document)

    assert caught.value.clause_id == clause_id
    assert problem in caught.value.problem


def test_a_clause_listed_twice_is_refused(tmp_path: Path) -> None:
    document = small_corpus_document()
    document["clauses"].append(copy.deepcopy(document["clauses"][0]))

    with pytest.raises(CorpusError, match=r"clause CSB-4\.1: appears twice"):
        load_document(tmp_path, document)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not UTF-8 JSON"),
        ("[]", "not a JSON object"),
        ('{"schema": "countersign.clause-corpus/2"}', "schema is 'countersign.clause-corpus/2'"),
    ],
)
def test_a_file_that_is_not_a_corpus_is_refused(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "corpus.json"
    path.write_text(content, encoding="utf-8")

    with pytest.raises(CorpusError, match=problem):
        load_corpus(path)


def test_a_missing_file_is_a_corpus_error_naming_the_path(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="cannot read"):
        load_corpus(tmp_path / "absent.json")


@settings(max_examples=60, deadline=None)
@given(clause_index=st.integers(0, 15), position=st.integers(0, 200), character=st.characters(codec="utf-8"))
def test_any_one_character_change_to_any_clause_text_is_refused(
    clause_index: int, position: int, character: str
) -> None:
    document = small_corpus_document()
    text = document["clauses"][clause_index]["text"]
    at = position % len(text)
    if text[at] == character:
        return
    document["clauses"][clause_index]["text"] = text[:at] + character + text[at + 1 :]

    with pytest.raises(CorpusError) as caught:
        parse_corpus(document)

    assert caught.value.clause_id == document["clauses"][clause_index]["id"]


def test_clause_create_and_corpus_create_agree_with_the_contract_hashes() -> None:
    document = small_corpus_document()
    clauses = [
        Clause.create(**{name: raw[name] for name in ("id", "form", "topic", "number", "title", "text")})
        for raw in document["clauses"]
    ]

    corpus = ClauseCorpus.create(parse_corpus(document).forms, clauses)

    assert [clause.sha256 for clause in clauses] == [raw["sha256"] for raw in document["clauses"]]
    assert corpus.version == document["version"]


def test_the_committed_corpus_verifies() -> None:
    corpus = load_corpus(REAL_CORPUS)

    assert len(corpus.clauses) >= 300
    assert len(corpus.form_codes) >= 5
