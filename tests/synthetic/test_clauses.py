import copy
import hashlib
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from countersign.synthetic import (
    ClauseProfileError,
    ProfileError,
    canonical_corpus_bytes,
    clause_ids_by_topic,
    generate_clause_corpus,
    load_clause_profile,
    write_clause_corpus,
)
from countersign.synthetic.clause_text import DEFINED_TERMS, TEMPLATES
from countersign.synthetic.clause_topics import TOPIC_KEYS, TOPICS
from countersign.synthetic.clauses import parse_clause_profile

ROOT = Path(__file__).resolve().parents[2]
CLAUSES_PROFILE = ROOT / "config" / "profiles" / "clauses.yaml"
COMMITTED_CORPUS = ROOT / "config" / "clauses" / "corpus.json"
QUERIES_FILE = ROOT / "config" / "evals" / "retrieval_queries.yaml"
COMMITTED_SEED = 7
FORM_CODES = ("CSB", "CSE", "CSI", "CSD", "CSM")
CLAUSE_ID = re.compile(r"^CS[BEIDM]-\d{1,2}\.\d{1,2}$")


@pytest.fixture(scope="module")
def corpus() -> dict[str, Any]:
    loaded = json.loads(COMMITTED_CORPUS.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


@pytest.fixture(scope="module")
def queries() -> list[dict[str, Any]]:
    data = yaml.safe_load(QUERIES_FILE.read_text(encoding="utf-8"))
    assert isinstance(data, dict) and set(data) == {"queries"}
    rows = data["queries"]
    assert isinstance(rows, list)
    return rows


def profile_data() -> dict[str, Any]:
    data = yaml.safe_load(CLAUSES_PROFILE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


# --- the committed corpus -------------------------------------------------------------------------------------------


def test_committed_corpus_is_seed_7_of_the_clauses_profile_byte_for_byte() -> None:
    regenerated = canonical_corpus_bytes(generate_clause_corpus(load_clause_profile(CLAUSES_PROFILE), COMMITTED_SEED))
    assert COMMITTED_CORPUS.read_bytes() == regenerated


def test_same_profile_and_seed_give_identical_bytes_and_another_seed_renumbers() -> None:
    profile = load_clause_profile(CLAUSES_PROFILE)
    first = canonical_corpus_bytes(generate_clause_corpus(profile, COMMITTED_SEED))
    again = canonical_corpus_bytes(generate_clause_corpus(load_clause_profile(CLAUSES_PROFILE), COMMITTED_SEED))
    other = generate_clause_corpus(profile, COMMITTED_SEED + 1)
    assert first == again
    assert other["version"] != json.loads(first)["version"]
    assert {clause["id"] for clause in other["clauses"]} != {clause["id"] for clause in json.loads(first)["clauses"]}


def test_corpus_has_five_forms_and_one_clause_per_form_and_topic(corpus: dict[str, Any]) -> None:
    assert corpus["schema"] == "countersign.clause-corpus/1"
    assert (corpus["profile"], corpus["seed"]) == ("clauses", COMMITTED_SEED)
    assert [form["code"] for form in corpus["forms"]] == list(FORM_CODES)
    for form in corpus["forms"]:
        assert set(form) == {"code", "name", "edition", "employer", "certifier", "pricing_document"}
    clauses = corpus["clauses"]
    assert len(clauses) >= 300
    assert len(clauses) == len(FORM_CODES) * len(TOPICS)
    assert Counter((clause["form"], clause["topic"]) for clause in clauses) == Counter(
        (form, topic) for form in FORM_CODES for topic in TOPIC_KEYS
    )
    assert len({clause["id"] for clause in clauses}) == len(clauses)
    titles = dict(TOPICS)
    for clause in clauses:
        assert set(clause) == {"id", "form", "topic", "number", "title", "text", "sha256"}
        assert CLAUSE_ID.match(clause["id"]), clause["id"]
        assert clause["id"] == f"{clause['form']}-{clause['number']}"
        assert clause["title"] == titles[clause["topic"]]


def test_clauses_are_ordered_by_form_then_numeric_clause_number(corpus: dict[str, Any]) -> None:
    order = {code: index for index, code in enumerate(FORM_CODES)}

    def position(clause: dict[str, Any]) -> tuple[int, int, int]:
        section, number = clause["number"].split(".")
        return order[clause["form"]], int(section), int(number)

    positions = [position(clause) for clause in corpus["clauses"]]
    assert positions == sorted(positions)


def test_numbering_differs_between_forms(corpus: dict[str, Any]) -> None:
    numbers_by_form = {code: clause_ids_by_topic(corpus, code) for code in FORM_CODES}
    layouts = {tuple(ids[topic].split("-")[1] for topic, _ in TOPICS) for ids in numbers_by_form.values()}
    assert len(layouts) == len(FORM_CODES)


def test_clause_and_corpus_hashes_recompute(corpus: dict[str, Any]) -> None:
    for clause in corpus["clauses"]:
        content = {key: clause[key] for key in ("id", "form", "topic", "number", "title", "text")}
        encoded = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        assert clause["sha256"] == hashlib.sha256(encoded).hexdigest(), clause["id"]
    lines = "\n".join(f"{c['id']} {c['sha256']}" for c in sorted(corpus["clauses"], key=lambda c: c["id"]))
    assert corpus["version"] == hashlib.sha256(lines.encode("utf-8")).hexdigest()


def test_editing_one_clause_text_changes_its_hash_and_the_corpus_version(corpus: dict[str, Any]) -> None:
    profile = load_clause_profile(CLAUSES_PROFILE)
    forms = list(profile.forms)
    changed_parameters = {**forms[0].parameters, "retention_trust_days": 13}
    forms[0] = type(forms[0])(**{**vars(forms[0]), "parameters": changed_parameters})
    edited = generate_clause_corpus(type(profile)(**{**vars(profile), "forms": tuple(forms)}), COMMITTED_SEED)
    before = {clause["id"]: clause["sha256"] for clause in corpus["clauses"]}
    after = {clause["id"]: clause["sha256"] for clause in edited["clauses"]}
    changed = [clause_id for clause_id in before if before[clause_id] != after[clause_id]]
    assert changed == [clause_ids_by_topic(corpus, forms[0].code)["retention.trust"]]
    assert edited["version"] != corpus["version"]


# --- the wording ----------------------------------------------------------------------------------------------------


def _sentences(text: str) -> int:
    return len(re.findall(r"[.!?](?:\s|$)", text))


def test_every_clause_is_two_to_four_sentences_of_35_to_90_words(corpus: dict[str, Any]) -> None:
    for clause in corpus["clauses"]:
        words = len(clause["text"].split())
        assert 35 <= words <= 90, (clause["id"], words)
        assert 2 <= _sentences(clause["text"]) <= 4, clause["id"]
        assert clause["text"].endswith(".")


def test_clause_text_names_no_form_code_no_clause_id_and_no_unfilled_placeholder(corpus: dict[str, Any]) -> None:
    for clause in corpus["clauses"]:
        text = clause["text"]
        assert not re.search(r"\bCS[BEIDM]\b", text), clause["id"]
        assert not re.search(r"\b\d{1,2}\.\d{1,2}\b(?!%| per cent)", text), clause["id"]
        assert "{" not in text and "}" not in text, clause["id"]


def test_clause_text_uses_the_forms_own_nouns_and_parameters(corpus: dict[str, Any]) -> None:
    forms = {form["code"]: form for form in corpus["forms"]}
    other_certifiers = {form["certifier"] for form in corpus["forms"]}
    texts = {(clause["form"], clause["topic"]): clause["text"] for clause in corpus["clauses"]}
    for code, form in forms.items():
        form_text = " ".join(text for (form_code, _), text in texts.items() if form_code == code)
        assert form["certifier"] in form_text and form["pricing_document"] in form_text
        for certifier in other_certifiers - {form["certifier"]}:
            assert f"the {certifier} " not in form_text.replace(f"the {form['certifier']} ", ""), (code, certifier)
    profile = load_clause_profile(CLAUSES_PROFILE)
    for form_profile in profile.forms:
        assert (
            f"{form_profile.parameters['defects_period_months']}"
            in texts[(form_profile.code, "completion.defects_period")]
        )
        assert f"{form_profile.parameters['pay_less_days']} days" in texts[(form_profile.code, "payment.pay_less")]


def test_defined_terms_appear_verbatim_in_every_form(corpus: dict[str, Any]) -> None:
    assert set(DEFINED_TERMS) <= TOPIC_KEYS
    for clause in corpus["clauses"]:
        for term in DEFINED_TERMS.get(clause["topic"], ()):
            assert term in clause["text"], (clause["id"], term)


def test_every_topic_has_at_least_three_templates_that_differ_beyond_nouns() -> None:
    assert set(TEMPLATES) == TOPIC_KEYS
    for topic, templates in TEMPLATES.items():
        assert len(templates) >= 3, topic
        vocabularies = [set(re.findall(r"[a-z]+", template.lower())) for template in templates]
        for index, first in enumerate(vocabularies):
            for second in vocabularies[index + 1 :]:
                overlap = len(first & second) / len(first | second)
                assert overlap < 0.6, (topic, round(overlap, 2))


def _wording_only(text: str, form: dict[str, Any]) -> str:
    for noun in sorted((form["employer"], form["certifier"], form["pricing_document"]), key=len, reverse=True):
        text = text.replace(noun, "<noun>")
    text = re.sub(r"\b(shall|must|will)\b", "<modal>", text)
    return re.sub(r"[£€$]?\d[\d,.]*(st|nd|rd|th)?", "#", text)


def test_forms_use_every_wording_of_a_topic_between_them(corpus: dict[str, Any]) -> None:
    forms = {form["code"]: form for form in corpus["forms"]}
    for topic in TOPIC_KEYS:
        wordings = {
            _wording_only(clause["text"], forms[clause["form"]])
            for clause in corpus["clauses"]
            if clause["topic"] == topic
        }
        assert len(wordings) == min(len(TEMPLATES[topic]), len(FORM_CODES)), topic


# --- the API around the corpus --------------------------------------------------------------------------------------


def test_clause_ids_by_topic_maps_every_topic_of_a_form_and_rejects_an_unknown_form(corpus: dict[str, Any]) -> None:
    ids = clause_ids_by_topic(corpus, "CSE")
    assert set(ids) == TOPIC_KEYS
    assert all(clause_id.startswith("CSE-") for clause_id in ids.values())
    with pytest.raises(ValueError, match="CSX"):
        clause_ids_by_topic(corpus, "CSX")


def test_write_clause_corpus_writes_the_canonical_bytes(tmp_path: Path) -> None:
    profile = load_clause_profile(CLAUSES_PROFILE)
    path = write_clause_corpus(profile, COMMITTED_SEED, tmp_path / "out")
    assert path == tmp_path / "out" / "corpus.json"
    assert path.read_bytes() == COMMITTED_CORPUS.read_bytes()


# --- profile validation ---------------------------------------------------------------------------------------------


def _with(path: str, value: object) -> dict[str, Any]:
    data = copy.deepcopy(profile_data())
    target: Any = data
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    if isinstance(target, list):
        target[int(keys[-1])] = value
    else:
        target[keys[-1]] = value
    return data


def _without(path: str) -> dict[str, Any]:
    data = copy.deepcopy(profile_data())
    target: Any = data
    keys = path.split(".")
    for key in keys[:-1]:
        target = target[int(key)] if isinstance(target, list) else target[key]
    del target[keys[-1]]
    return data


def _duplicate_first_form() -> dict[str, Any]:
    data = copy.deepcopy(profile_data())
    data["forms"].append(copy.deepcopy(data["forms"][0]))
    return data


PARAMS = "forms.0.parameters"
FIELD = "forms[0].parameters"


@pytest.mark.parametrize(
    ("data", "field", "reason_part"),
    [
        (_with("colour", "blue"), "colour", "unknown key"),
        (_with("kind", "books"), "kind", "expected 'clauses'"),
        (_without("currency"), "currency", "missing"),
        (_with("currency", "pounds"), "currency", "ISO"),
        (_with("forms", []), "forms", "non-empty list"),
        (_with("forms.0.colour", "red"), "forms[0].colour", "unknown key"),
        (_with("forms.0.code", "CSX"), "forms[0].code", "unknown form code"),
        (_duplicate_first_form(), "forms[5].code", "duplicate form"),
        (_with("forms.0.edition", 2024), "forms[0].edition", "non-empty string"),
        (_with("forms.0.modal", "ought to"), "forms[0].modal", "expected one of"),
        (_with("forms.0.certifier", "{employer}"), "forms[0].certifier", "brace"),
        (_with(f"{PARAMS}.interest_rate", 5), f"{FIELD}.interest_rate", "unknown key"),
        (_without(f"{PARAMS}.pay_less_days"), f"{FIELD}.pay_less_days", "missing"),
        (_with(f"{PARAMS}.retention_percent", 5.5), f"{FIELD}.retention_percent", "quoted decimal"),
        (_with(f"{PARAMS}.retention_percent", 0), f"{FIELD}.retention_percent", "above 0"),
        (_with(f"{PARAMS}.retention_percent", 25), f"{FIELD}.retention_percent", "at most 20"),
        (_with(f"{PARAMS}.due_date_days", True), f"{FIELD}.due_date_days", "expected an integer"),
        (_with(f"{PARAMS}.valuation_day", 31), f"{FIELD}.valuation_day", "between 1 and 28"),
        (_with(f"{PARAMS}.liquidated_damages_per_week", 12500), f"{FIELD}.liquidated_damages_per_week", "2 places"),
        (_with(f"{PARAMS}.off_site_bond_amount", "0.00"), f"{FIELD}.off_site_bond_amount", "above zero"),
        (_with(f"{PARAMS}.retention_cap_percent", 6), f"{FIELD}.retention_cap_percent", "must not exceed"),
        (
            _with(f"{PARAMS}.advance_full_repayment_percent", 10),
            f"{FIELD}.advance_full_repayment_percent",
            "greater than advance_repayment_start_percent",
        ),
        (
            _with(f"{PARAMS}.advance_repayment_rate_percent", 5),
            f"{FIELD}.advance_repayment_rate_percent",
            "less than advance_percent",
        ),
        (_with(f"{PARAMS}.pay_less_days", 14), f"{FIELD}.pay_less_days", "final_date_days"),
    ],
)
def test_malformed_clause_profile_fails_naming_file_key_and_reason(
    data: dict[str, Any], field: str, reason_part: str
) -> None:
    with pytest.raises(ClauseProfileError) as caught:
        parse_clause_profile(data, "profiles/broken.yaml")
    assert caught.value.source == "profiles/broken.yaml"
    assert caught.value.field == field
    assert reason_part in caught.value.reason
    assert str(caught.value) == f"profiles/broken.yaml: {field}: {caught.value.reason}"
    assert isinstance(caught.value, ProfileError) and isinstance(caught.value, ValueError)


def test_clause_profile_file_that_is_not_yaml_or_missing_names_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "clauses.yaml"
    broken.write_text("kind: clauses\nforms: [unclosed\n", encoding="utf-8")
    with pytest.raises(ClauseProfileError) as caught:
        load_clause_profile(broken)
    assert (caught.value.source, caught.value.field) == (str(broken), "<yaml>")
    with pytest.raises(ClauseProfileError) as missing:
        load_clause_profile(tmp_path / "absent.yaml")
    assert missing.value.field == "<file>"


# --- the labelled queries -------------------------------------------------------------------------------------------


def test_labelled_queries_point_at_clauses_of_their_own_form(
    corpus: dict[str, Any], queries: list[dict[str, Any]]
) -> None:
    forms_by_id = {clause["id"]: clause["form"] for clause in corpus["clauses"]}
    assert len(queries) >= 150
    assert len({query["id"] for query in queries}) == len(queries)
    for query in queries:
        assert set(query) == {"id", "form", "kind", "query", "relevant"}, query
        assert query["kind"] in {"paraphrase", "exact"}, query["id"]
        assert isinstance(query["query"], str) and query["query"].strip(), query["id"]
        assert isinstance(query["relevant"], list) and query["relevant"], query["id"]
        assert len(set(query["relevant"])) == len(query["relevant"]), query["id"]
        for clause_id in query["relevant"]:
            assert clause_id in forms_by_id, (query["id"], clause_id)
            assert forms_by_id[clause_id] == query["form"], (query["id"], clause_id)


def test_labelled_queries_cover_both_kinds_every_form_and_every_topic(
    corpus: dict[str, Any], queries: list[dict[str, Any]]
) -> None:
    kinds = Counter(query["kind"] for query in queries)
    assert kinds["paraphrase"] > kinds["exact"] > 0
    forms = Counter(query["form"] for query in queries)
    assert set(forms) == set(FORM_CODES)
    assert min(forms.values()) >= 30
    topic_of = {clause["id"]: clause["topic"] for clause in corpus["clauses"]}
    covered = {topic_of[clause_id] for query in queries for clause_id in query["relevant"]}
    assert covered == TOPIC_KEYS
    assert len({query["query"].strip().lower() for query in queries}) == len(queries)
