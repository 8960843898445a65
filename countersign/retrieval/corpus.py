"""The canonical clause corpus: load `config/clauses/corpus.json` and prove every byte of it is what it claims.

A clause's `sha256` is the SHA-256 of its canonical JSON (id, form, topic, number, title, text; sorted keys, no
whitespace, UTF-8); the corpus `version` is the SHA-256 of the `id sha256` lines sorted by id. `load_corpus`
recomputes both and refuses the file, naming the clause, when either disagrees: an edited clause can never be
served under the hash a trace event stamped.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

SCHEMA = "countersign.clause-corpus/1"
CLAUSE_ID = re.compile(r"^CS[BEIDM]-(\d{1,2}\.\d{1,2})$")
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
MAX_CORPUS_BYTES = 64 * 1024 * 1024
_CLAUSE_FIELDS = ("id", "form", "topic", "number", "title", "text", "sha256")
_FORM_FIELDS = ("code", "name", "edition", "employer", "certifier", "pricing_document")


class CorpusError(ValueError):
    """The corpus file is unreadable, malformed or fails its hashes; `clause_id` names the clause at fault, if any."""

    def __init__(self, problem: str, *, clause_id: str | None = None) -> None:
        super().__init__(f"clause {clause_id}: {problem}" if clause_id else problem)
        self.problem = problem
        self.clause_id = clause_id


@dataclass(frozen=True)
class ContractForm:
    code: str
    name: str
    edition: str
    employer: str
    certifier: str
    pricing_document: str


@dataclass(frozen=True)
class Clause:
    id: str
    form: str
    topic: str
    number: str
    title: str
    text: str
    sha256: str

    @classmethod
    def create(cls, *, id: str, form: str, topic: str, number: str, title: str, text: str) -> Clause:
        """A clause with its hash computed (for corpora built in memory: the generator, the benchmark)."""
        return cls(id, form, topic, number, title, text, clause_sha256(id, form, topic, number, title, text))

    @property
    def searchable_text(self) -> str:
        """What both retrieval arms index: the title, then the text."""
        return f"{self.title}. {self.text}"


@dataclass(frozen=True)
class ClauseCorpus:
    version: str
    forms: tuple[ContractForm, ...]
    clauses: tuple[Clause, ...]
    profile: str = ""
    seed: int = 0

    @classmethod
    def create(
        cls, forms: Sequence[ContractForm], clauses: Sequence[Clause], *, profile: str = "", seed: int = 0
    ) -> ClauseCorpus:
        """A corpus with its version computed from the clauses' hashes."""
        return cls(corpus_version(clauses), tuple(forms), tuple(clauses), profile, seed)

    @cached_property
    def by_id(self) -> Mapping[str, Clause]:
        return {clause.id: clause for clause in self.clauses}

    @cached_property
    def form_codes(self) -> frozenset[str]:
        return frozenset(form.code for form in self.forms)

    def clause(self, clause_id: str) -> Clause:
        """The clause with this id; KeyError when the corpus has none."""
        return self.by_id[clause_id]


def clause_sha256(id: str, form: str, topic: str, number: str, title: str, text: str) -> str:
    body = {"id": id, "form": form, "topic": topic, "number": number, "title": title, "text": text}
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def corpus_version(clauses: Iterable[Clause]) -> str:
    lines = "\n".join(f"{clause.id} {clause.sha256}" for clause in sorted(clauses, key=lambda clause: clause.id))
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


def load_corpus(path: Path) -> ClauseCorpus:
    """Read and verify the corpus file; CorpusError names the clause and what was wrong."""
    try:
        size = path.stat().st_size
        if size > MAX_CORPUS_BYTES:
            raise CorpusError(f"{path}: {size} bytes, more than the {MAX_CORPUS_BYTES} a corpus may have")
        document = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorpusError(f"{path}: not UTF-8 JSON ({exc})") from exc
    return parse_corpus(document)


def parse_corpus(document: Any) -> ClauseCorpus:
    """Verify a decoded corpus document: schema, forms, every clause's fields and hash, then the version."""
    if not isinstance(document, dict):
        raise CorpusError("the corpus is not a JSON object")
    if document.get("schema") != SCHEMA:
        raise CorpusError(f"schema is {document.get('schema')!r}, expected {SCHEMA!r}")
    forms = _parse_forms(document.get("forms"))
    codes = {form.code for form in forms}
    raw_clauses = document.get("clauses")
    if not isinstance(raw_clauses, list) or not raw_clauses:
        raise CorpusError("`clauses` must be a non-empty list")
    clauses: list[Clause] = []
    seen: set[str] = set()
    for index, raw in enumerate(raw_clauses):
        clause = _parse_clause(raw, index, codes)
        if clause.id in seen:
            raise CorpusError("appears twice", clause_id=clause.id)
        seen.add(clause.id)
        clauses.append(clause)
    version = document.get("version")
    computed = corpus_version(clauses)
    if version != computed:
        raise CorpusError(f"version is {version!r} but the clauses hash to {computed}")
    profile, seed = document.get("profile", ""), document.get("seed", 0)
    if not isinstance(profile, str) or isinstance(seed, bool) or not isinstance(seed, int):
        raise CorpusError("`profile` must be a string and `seed` an integer")
    return ClauseCorpus(computed, forms, tuple(clauses), profile, seed)


def _parse_forms(raw_forms: Any) -> tuple[ContractForm, ...]:
    if not isinstance(raw_forms, list) or not raw_forms:
        raise CorpusError("`forms` must be a non-empty list")
    forms: list[ContractForm] = []
    for index, raw in enumerate(raw_forms):
        if not isinstance(raw, dict) or not all(isinstance(raw.get(name), str) for name in _FORM_FIELDS):
            raise CorpusError(f"forms[{index}] needs the string fields {', '.join(_FORM_FIELDS)}")
        forms.append(ContractForm(**{name: raw[name] for name in _FORM_FIELDS}))
    codes = [form.code for form in forms]
    if len(set(codes)) != len(codes):
        raise CorpusError(f"a form code appears twice in {codes}")
    return tuple(forms)


def _parse_clause(raw: Any, index: int, form_codes: set[str]) -> Clause:
    if not isinstance(raw, dict):
        raise CorpusError(f"clauses[{index}] is not an object")
    raw_id = raw.get("id")
    clause_id = raw_id if isinstance(raw_id, str) else f"clauses[{index}]"
    missing = [name for name in _CLAUSE_FIELDS if not isinstance(raw.get(name), str) or not raw[name]]
    if missing:
        raise CorpusError(f"missing or empty string fields: {', '.join(missing)}", clause_id=clause_id)
    clause = Clause(**{name: raw[name] for name in _CLAUSE_FIELDS})
    matched = CLAUSE_ID.match(clause.id)
    if matched is None:
        raise CorpusError(f"id does not match {CLAUSE_ID.pattern}", clause_id=clause_id)
    if not clause.id.startswith(f"{clause.form}-"):
        raise CorpusError(f"id does not start with its form {clause.form!r}", clause_id=clause_id)
    if clause.form not in form_codes:
        raise CorpusError(f"form {clause.form!r} is not one of the corpus's forms", clause_id=clause_id)
    if matched.group(1) != clause.number:
        raise CorpusError(f"number {clause.number!r} disagrees with the id", clause_id=clause_id)
    if SHA256_HEX.match(clause.sha256) is None:
        raise CorpusError("sha256 is not 64 lower-case hex digits", clause_id=clause_id)
    computed = clause_sha256(clause.id, clause.form, clause.topic, clause.number, clause.title, clause.text)
    if computed != clause.sha256:
        raise CorpusError(
            f"sha256 is {clause.sha256} but its id, form, topic, number, title and text hash to {computed}",
            clause_id=clause_id,
        )
    return clause
