"""The duplicate detector: a re-submitted certificate found by exact features and explicit thresholds, no model.

Features, each computed exactly: vendor identity (the name as a companies registry compares it: legal form, "&",
punctuation, spacing and case disregarded), invoice number (in the scope its contract numbers applications, declared
or read from the number itself: `conventions.read_application_numbering`), amount
due, date proximity, description similarity (token Jaccard) and scope overlap (the same bill-line scope hash claimed
over the same quantity interval, valued at the claim's own rate). A hold names the earlier certificate, its line with
the largest overlap and the overlap amount, so it can be defended line by line.

Every submission is compared with every earlier one, in submission order (date, contract, number, id), whatever its
id; the later of a same-day pair is the re-send. Two submissions are compared while the later is within the earlier
one's window: its contract's declared `payment_terms.duplicate_window_days`, else derived from its payment cycle
(`window_days`). Held whatever the amount or wording: every claimed quantity claimed before (a full scope overlap),
or a statement without line work restated to the penny. Not duplicates: a certificate and one it names as superseded
(directly or through a chain of corrections), two certificates of different contracts that claim no common scope,
and work climbing back through quantities a re-measurement took back (`Floors`). ADR 0030 gives the reasons.

A duplicate is a fact, not a judgement: this module imports nothing that could reach a model (a test asserts it).
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from countersign.certificates.conventions import read_application_numbering
from countersign.certificates.model import ApplicationNumbering, Certificate, Contract, PaymentTerms, amount_text
from countersign.money.units import DEFAULT_MINOR_UNITS, minor_units

AMOUNT_TOLERANCE = Decimal("0.05")
"""Largest relative difference between the two amounts due: re-submissions are often nudged by a line or two."""
DATE_WINDOW_DAYS = 45
"""The fixed window the detector used before windows came from the contract's terms: kept for the sweep's baseline
(`Thresholds.date_window_days` overrides every contract's window when set)."""
SIMILARITY_THRESHOLD = Decimal("0.70")
"""Smallest mean of description similarity and scope-overlap ratio (description alone when no line work is claimed)."""
VALUATION_PERIOD_DAYS = 31
"""The longest valuation period of the monthly cycle every contract here is valued on."""
RESUBMISSION_PERIODS = 2
"""Valuation periods after the earlier certificate's final date for payment in which a re-submission is looked for:
the application already in preparation when non-payment becomes known, and the one after it (ADR 0030)."""


_TOKEN = re.compile(r"[a-z0-9]+")
_LEGAL_FORMS = {
    "limited": "ltd",
    "ltd": "ltd",
    "plc": "plc",
    "llp": "llp",
    "lp": "lp",
    "inc": "inc",
    "incorporated": "inc",
    "corp": "corp",
    "corporation": "corp",
    "co": "co",
    "company": "co",
    "cyf": "cyf",
    "cyfyngedig": "cyf",
    "ccc": "ccc",
}
"""Legal-form words as a registry spells them canonically ("Limited" and "Ltd" are one form)."""
_LEGAL_FORM_ENDINGS = tuple(
    tuple(words.split())
    for words in (
        "public limited company",
        "limited liability partnership",
        "limited partnership",
        "and company",
        "and co",
        "cwmni cyfyngedig cyhoeddus",
        *_LEGAL_FORMS,
    )
)
"""Endings disregarded when a registry compares two company names (the "same as" rules of the Company, Limited
Liability Partnership and Business (Names and Trading Disclosures) Regulations 2015, Schedule 3): a name cannot be
registered that differs from another only by these, so two names that do are one company."""


@dataclass(frozen=True)
class Thresholds:
    amount_tolerance: Decimal = AMOUNT_TOLERANCE
    date_window_days: int | None = None
    """None: each earlier certificate's own window (`window_days` of its contract's payment terms); a number
    overrides every contract's window (the sweep's fixed-window rows)."""
    similarity: Decimal = SIMILARITY_THRESHOLD


@dataclass(frozen=True)
class ClaimedInterval:
    label: str
    """`package/boq_line` on the certificate."""
    scope_hash: str
    from_centi: int
    to_centi: int
    value_minor: int


SubmissionOrder = tuple[date, str, int, str]
"""(date, contract, certificate number, certificate id)."""


@dataclass(frozen=True)
class Submission:
    certificate: str
    contract: str
    number: int
    vendor_key: str
    """The vendor's identity as a registry compares names (`vendor_identity`)."""
    invoice_key: str
    """The normalised invoice number."""
    amount_due_minor: int
    date: date
    description_tokens: frozenset[str]
    claims: tuple[ClaimedInterval, ...]
    window_days: int
    """How long after this submission a later one is still compared with it (its contract's terms)."""
    supersedes: str | None = None
    quantities: tuple[tuple[str, int], ...] = ()
    """(scope hash, quantity to date) of every line the certificate states: how far each line stands after it."""
    one_series: bool = True
    """The contractor numbers its invoices in one series across its contracts (declared by the contract, or read
    from the number: `conventions.read_application_numbering`), so the number names one invoice whatever the
    contract; False when the numbers restart per contract or the number cannot tell."""
    places: int = DEFAULT_MINOR_UNITS
    """The minor units of its contract's currency (`countersign.money.units.minor_units`): how its money is scaled."""

    @property
    def order(self) -> SubmissionOrder:
        """Submission order: date, then contract, certificate number and id (`countersign.certificates.pipeline`)."""
        return (self.date, self.contract, self.number, self.certificate)


@dataclass(frozen=True)
class Features:
    same_invoice: bool
    amount_difference: Decimal
    days_apart: int
    description_similarity: Decimal
    overlap_minor: int
    overlap_ratio: Decimal
    other_line: str
    claims_line_work: bool
    """False when the candidate claims no bill-line progress (only variations, materials or releases)."""
    same_reference_numbers: bool
    """Both descriptions name the same numbers (valuation number, date of the works): the same statement."""
    same_contract: bool = True
    window_days: int = DATE_WINDOW_DAYS
    """The earlier submission's window (its contract's terms)."""

    @property
    def similarity(self) -> Decimal:
        if not self.claims_line_work:
            return self.description_similarity
        return (self.description_similarity + self.overlap_ratio) / 2

    @property
    def same_statement(self) -> bool:
        """The same valuation restated to the penny: same contract, the same reference numbers, the same amount due."""
        return self.same_contract and self.same_reference_numbers and self.amount_difference == 0

    @property
    def full_overlap(self) -> bool:
        """Every unit of bill-line work the candidate claims was claimed by the earlier submission."""
        return self.claims_line_work and self.overlap_ratio == 1


@dataclass(frozen=True)
class DuplicateHold:
    certificate: str
    other_certificate: str
    other_line: str
    overlap_minor: int
    features: Features
    places: int = DEFAULT_MINOR_UNITS
    """The minor units of the held certificate's currency."""

    @property
    def overlap(self) -> Decimal:
        """The overlap as an amount in the held certificate's currency."""
        return Decimal(self.overlap_minor).scaleb(-self.places)

    def explanation(self, currency: str) -> str:
        """Why the certificate is held, the overlap written with `currency` (its contract's)."""
        f = self.features
        if f.same_invoice:
            basis = "the same invoice number"
        elif not f.claims_line_work and f.same_statement:
            basis = (
                f"the same valuation restated: same contract, same reference numbers, the same amount due, "
                f"{f.days_apart} days apart"
            )
        elif f.full_overlap and f.amount_difference > 0:
            basis = (
                f"every quantity it claims was claimed before (scope overlap 100%), {f.days_apart} days apart, "
                f"amount {f.amount_difference:.2%} different"
            )
        else:
            basis = (
                f"amount within {f.amount_difference:.2%}, {f.days_apart} days apart, description similarity "
                f"{f.description_similarity:.2f}, scope overlap {f.overlap_ratio:.0%}"
            )
        return (
            f"certificate {self.certificate} claims work already claimed by certificate {self.other_certificate} "
            f"line {self.other_line} (overlap {amount_text(self.overlap, currency)}): {basis}"
        )


def _words(name: str) -> list[str]:
    """Lower-case words, "&" read as "and", punctuation dropped, spelled-out initials joined ("L.L.P." -> "llp")."""
    tokens = _TOKEN.findall(name.lower().replace("&", " and "))
    joined: list[str] = []
    initials = ""
    for token in tokens:
        if len(token) == 1 and token.isalpha():
            initials += token
            continue
        if initials:
            joined.append(initials)
            initials = ""
        joined.append(token)
    if initials:
        joined.append(initials)
    return [_LEGAL_FORMS.get(word, word[:-1] if len(word) > 4 and word.endswith("s") else word) for word in joined]


def normalise_vendor(name: str) -> str:
    """Lower case, punctuation dropped, spelled-out initials joined, legal forms canonical ("Limited" -> "ltd")."""
    return " ".join(_words(name))


_CANONICAL_ENDINGS = tuple(sorted({tuple(_words(" ".join(e))) for e in _LEGAL_FORM_ENDINGS}, key=len, reverse=True))


def vendor_identity(name: str) -> str:
    """The name as a registry compares it: `normalise_vendor` with its legal-form ending(s) and a leading "the"
    disregarded, so "Acme Construction Ltd", "ACME CONSTRUCTION LIMITED" and "Acme Construction" are one vendor."""
    words = _words(name)
    if words[:1] == ["the"] and len(words) > 1:
        words = words[1:]
    stripped = True
    while stripped:
        stripped = False
        for ending in _CANONICAL_ENDINGS:
            if len(words) > len(ending) and tuple(words[-len(ending) :]) == ending:
                words = words[: -len(ending)]
                stripped = True
                break
    return " ".join(words)


def normalise_invoice(number: str) -> str:
    return "".join(_TOKEN.findall(number.lower()))


def description_tokens(text: str) -> frozenset[str]:
    return frozenset(_TOKEN.findall(text.lower()))


def window_days(terms: PaymentTerms) -> int:
    """Days after a certificate in which a later submission is compared with it: the contract's declared
    `duplicate_window_days`, else its payment cycle: due date and final date for payment, then
    `RESUBMISSION_PERIODS` valuation periods (86 days under the Scheme's defaults)."""
    if terms.duplicate_window_days is not None:
        return terms.duplicate_window_days
    return terms.due_date_days + terms.final_date_days + RESUBMISSION_PERIODS * VALUATION_PERIOD_DAYS


def submission_of(
    certificate: Certificate, contract: Contract | None = None, *, read_documents: bool = True
) -> Submission:
    """The certificate's features; `contract` (its own) supplies the window and the invoice-numbering scope, the
    documented defaults when it is None. Numbering the contract does not declare is read from the invoice number
    (`conventions.read_application_numbering`); `read_documents=False` keeps the default (the eval's control)."""
    claims = tuple(
        ClaimedInterval(
            label=f"{line.package}/{line.boq_line}",
            scope_hash=line.scope_hash,
            from_centi=line.previous_quantity_centi,
            to_centi=line.quantity_to_date_centi,
            value_minor=line.period_value_minor,
        )
        for line in certificate.lines
        if line.quantity_to_date_centi > line.previous_quantity_centi and line.period_value_minor > 0
    )
    invoice = normalise_invoice(certificate.invoice_number)
    numbering = (
        read_application_numbering(contract, certificate)
        if read_documents
        else (ApplicationNumbering.VENDOR if contract is None else contract.conventions.application_numbering)
    )
    return Submission(
        certificate=certificate.id,
        contract=certificate.contract,
        number=certificate.number,
        vendor_key=vendor_identity(certificate.vendor),
        invoice_key=invoice,
        amount_due_minor=certificate.totals.amount_due_minor,
        date=certificate.date,
        description_tokens=description_tokens(certificate.description),
        claims=claims,
        window_days=window_days(contract.payment_terms if contract is not None else PaymentTerms()),
        supersedes=certificate.supersedes,
        quantities=tuple((line.scope_hash, line.quantity_to_date_centi) for line in certificate.lines),
        places=DEFAULT_MINOR_UNITS if contract is None else minor_units(contract.currency),
        one_series=numbering is ApplicationNumbering.VENDOR,
    )


def jaccard(a: frozenset[str], b: frozenset[str]) -> Decimal:
    if not a and not b:
        return Decimal(0)
    return Decimal(len(a & b)) / Decimal(len(a | b))


Floors = Mapping[str, int]
"""Scope hash -> the lowest quantity to date a line of the earlier certificate's contract was certified at since."""


def withdrawn(claim: ClaimedInterval, floors: Floors) -> ClaimedInterval:
    """`claim` without the quantities a later certificate took back (a line re-measured down below the claim's end):
    work climbing back through them is claimed afresh, not again."""
    floor = floors.get(claim.scope_hash)
    if floor is None or floor >= claim.to_centi:
        return claim
    standing = max(claim.from_centi, floor)
    value = claim.value_minor * (standing - claim.from_centi) // (claim.to_centi - claim.from_centi)
    return ClaimedInterval(claim.label, claim.scope_hash, claim.from_centi, standing, value)


def features(candidate: Submission, earlier: Submission, floors: Floors | None = None) -> Features:
    """The pair's features; `floors` (see `Floors`) trims the earlier certificate's claims to what still stands."""
    larger = max(abs(candidate.amount_due_minor), abs(earlier.amount_due_minor))
    difference = (
        Decimal(0)
        if larger == 0
        else Decimal(abs(candidate.amount_due_minor - earlier.amount_due_minor)) / Decimal(larger)
    )
    by_scope: dict[str, list[ClaimedInterval]] = {}
    for claim in earlier.claims:
        by_scope.setdefault(claim.scope_hash, []).append(withdrawn(claim, floors or {}))
    overlap = 0
    best_line, best_overlap = "", 0
    for claim in candidate.claims:
        span = claim.to_centi - claim.from_centi
        for other in by_scope.get(claim.scope_hash, ()):
            shared = min(claim.to_centi, other.to_centi) - max(claim.from_centi, other.from_centi)
            if shared <= 0:
                continue
            amount = claim.value_minor * shared // span
            overlap += amount
            if amount > best_overlap:
                best_line, best_overlap = other.label, amount
    claimed = sum(claim.value_minor for claim in candidate.claims)
    ratio = Decimal(0) if claimed == 0 else min(Decimal(1), Decimal(overlap) / Decimal(claimed))
    same_contract = candidate.contract == earlier.contract
    # the same number names one invoice on one contract, or across contracts when the numbers run in one series;
    # where they restart per contract, two contracts' numbers coincide by design and only shared work counts
    same_number = candidate.invoice_key == earlier.invoice_key
    one_invoice = same_number and (same_contract or (candidate.one_series and earlier.one_series))
    return Features(
        same_invoice=one_invoice,
        amount_difference=difference,
        days_apart=abs((candidate.date - earlier.date).days),
        description_similarity=jaccard(candidate.description_tokens, earlier.description_tokens),
        overlap_minor=overlap,
        overlap_ratio=ratio,
        other_line=best_line or "(no line)",
        claims_line_work=claimed > 0,
        same_reference_numbers=_numbers(candidate.description_tokens) == _numbers(earlier.description_tokens),
        same_contract=same_contract,
        window_days=earlier.window_days,
    )


def _numbers(tokens: frozenset[str]) -> frozenset[str]:
    return frozenset(token for token in tokens if token.isdigit())


def is_duplicate(found: Features, thresholds: Thresholds) -> bool:
    window = found.window_days if thresholds.date_window_days is None else thresholds.date_window_days
    if found.days_apart > window:
        return False
    if found.same_invoice:
        return True
    if not found.same_contract and found.overlap_minor == 0:
        return False  # another contract's own work: a sister contract's release or valuation is not this one
    if found.full_overlap:
        return True  # every quantity claimed again: whatever the amount, it would be paid twice
    if found.amount_difference > thresholds.amount_tolerance:
        return False
    if not found.claims_line_work and not found.same_reference_numbers:
        return False  # no scope to compare: only a restatement of the same valuation counts
    if not found.claims_line_work and found.same_statement:
        return True  # however it is worded
    return found.similarity >= thresholds.similarity


class DuplicateIndex:
    """The submissions a new certificate is compared against, blocked by vendor identity, in submission order.

    `add` a submission that later ones are compared against (in the pipeline, a certified one); `note` one that is
    not (held, or never paid) so that the chain of corrections through it is still known. `check` notes its
    candidate too.
    """

    def __init__(self, thresholds: Thresholds | None = None) -> None:
        self.thresholds = thresholds or Thresholds()
        self._by_vendor: dict[str, list[Submission]] = {}
        self._supersedes: dict[str, str] = {}

    def note(self, submission: Submission) -> None:
        if submission.supersedes is not None:
            self._supersedes[submission.certificate] = submission.supersedes

    def add(self, submission: Submission) -> None:
        self.note(submission)
        self._by_vendor.setdefault(submission.vendor_key, []).append(submission)

    def corrected_by(self, candidate: Submission) -> frozenset[str]:
        """The certificates `candidate` supersedes, directly or through earlier corrections."""
        found: set[str] = set()
        current = candidate.supersedes
        while current is not None and current not in found and current != candidate.certificate:
            found.add(current)
            current = self._supersedes.get(current)
        return frozenset(found)

    def compared(self, candidate: Submission) -> list[tuple[Submission, Floors]]:
        """The earlier submissions `candidate` is compared with (same vendor, within the window, not one it corrects),
        in submission order, each with its `Floors`: for the lines on which `candidate` continues from where the
        contract's latest submission left them, the lowest quantity a later-numbered certificate of the same contract
        put them at after it (a re-measurement). A re-sent copy continues from nothing, so it is never let off."""
        corrected = self.corrected_by(candidate)
        submitted = [e for e in self._by_vendor.get(candidate.vendor_key, []) if e.order < candidate.order]
        latest = next((e for e in reversed(submitted) if e.contract == candidate.contract), None)
        standing = dict(latest.quantities) if latest is not None else {}
        continuing = {c.scope_hash for c in candidate.claims if standing.get(c.scope_hash) == c.from_centi}
        found: list[tuple[Submission, Floors]] = []
        after: list[Submission] = []
        for earlier in reversed(submitted):
            if earlier.contract != candidate.contract:
                if earlier.certificate not in corrected and self._within_window(candidate, earlier):
                    found.append((earlier, {}))
                continue
            if earlier.certificate not in corrected and self._within_window(candidate, earlier):
                found.append((earlier, _floors(earlier, after, continuing)))
            after.append(earlier)
        return found[::-1]

    def _within_window(self, candidate: Submission, earlier: Submission) -> bool:
        window = self.thresholds.date_window_days
        return (candidate.date - earlier.date).days <= (earlier.window_days if window is None else window)

    def check(self, candidate: Submission) -> DuplicateHold | None:
        """The hold for `candidate` against the best-matching earlier submission, or None."""
        self.note(candidate)
        if candidate.amount_due_minor <= 0:
            return None  # nothing would be paid twice
        best: tuple[Decimal, DuplicateHold] | None = None
        for earlier, floors in self.compared(candidate):
            found = features(candidate, earlier, floors)
            if not is_duplicate(found, self.thresholds):
                continue
            rank = Decimal(1) + found.similarity if found.same_invoice else found.similarity
            if best is None or rank > best[0]:
                hold = DuplicateHold(
                    certificate=candidate.certificate,
                    other_certificate=earlier.certificate,
                    other_line=found.other_line,
                    overlap_minor=found.overlap_minor,
                    features=found,
                    places=candidate.places,
                )
                best = (rank, hold)
        return None if best is None else best[1]


def _floors(earlier: Submission, after: Sequence[Submission], lines: Container[str]) -> Floors:
    """For each of `lines`, the lowest quantity to date of the certificates in `after` numbered after `earlier`."""
    floors: dict[str, int] = {}
    for submission in after:
        if submission.number <= earlier.number:
            continue  # a re-sent copy of an older certificate takes nothing back
        for scope, quantity in submission.quantities:
            if scope in lines:
                floors[scope] = min(quantity, floors.get(scope, quantity))
    return floors


def submissions_of(
    certificates: Iterable[Certificate], contracts: Mapping[str, Contract] | None = None
) -> list[Submission]:
    """Each certificate's submission with its own contract's terms (defaults for a contract not in `contracts`)."""
    found = contracts or {}
    return [submission_of(c, found.get(c.contract)) for c in certificates]


def detect(
    certificates: Iterable[Certificate],
    thresholds: Thresholds | None = None,
    *,
    contracts: Mapping[str, Contract] | None = None,
) -> tuple[DuplicateHold, ...]:
    """Hold every certificate that duplicates an earlier one (in submission order) from the same vendor;
    `contracts` (id -> contract) give each certificate's window and invoice-numbering scope."""
    return detect_submissions(submissions_of(certificates, contracts), thresholds or Thresholds())


def detect_submissions(
    submissions: Sequence[Submission], thresholds: Thresholds, *, comparable: Container[str] | None = None
) -> tuple[DuplicateHold, ...]:
    """Check each submission in submission order against the earlier ones in `comparable` (default: all of them)."""
    index = DuplicateIndex(thresholds)
    holds: list[DuplicateHold] = []
    for submission in sorted(submissions, key=lambda s: s.order):
        hold = index.check(submission)
        if hold is not None:
            holds.append(hold)
        if comparable is None or submission.certificate in comparable:
            index.add(submission)
    return tuple(sorted(holds, key=lambda hold: hold.certificate))


@dataclass(frozen=True)
class SweepRow:
    similarity: Decimal
    amount_tolerance: Decimal
    held: int
    true_positives: int
    false_positives: int
    false_negatives: int

    @property
    def precision(self) -> Decimal:
        return _ratio(self.true_positives, self.true_positives + self.false_positives)

    @property
    def recall(self) -> Decimal:
        return _ratio(self.true_positives, self.true_positives + self.false_negatives)


SWEEP_SIMILARITIES = tuple(Decimal(n) / 10 for n in range(3, 10))
SWEEP_AMOUNT_TOLERANCES = (Decimal("0"), Decimal("0.005"), Decimal("0.02"), Decimal("0.05"))


def score_holds(holds: Iterable[DuplicateHold], duplicates: Mapping[str, str]) -> tuple[int, int, int]:
    """(true positives, false positives, false negatives) against `duplicates` (re-submission id -> original id)."""
    held = {hold.certificate for hold in holds}
    true_positives = len(held & set(duplicates))
    return true_positives, len(held) - true_positives, len(set(duplicates) - held)


def sweep(
    certificates: Iterable[Certificate],
    duplicates: Mapping[str, str],
    *,
    similarities: Sequence[Decimal] = SWEEP_SIMILARITIES,
    amount_tolerances: Sequence[Decimal] = SWEEP_AMOUNT_TOLERANCES,
    date_window_days: int | None = None,
    comparable: Container[str] | None = None,
    contracts: Mapping[str, Contract] | None = None,
) -> tuple[SweepRow, ...]:
    """The precision/recall table over the threshold grid, against the seeded re-submissions.

    `comparable` limits what a submission is compared against (the evaluation passes the certificates its pipeline
    certified, as the workflow would); by default every earlier submission. `date_window_days` None uses each
    contract's window (from `contracts`, the documented defaults for a contract not given).
    """
    submissions = submissions_of(certificates, contracts)
    rows = []
    for tolerance in amount_tolerances:
        for similarity in similarities:
            thresholds = Thresholds(
                amount_tolerance=tolerance, date_window_days=date_window_days, similarity=similarity
            )
            holds = detect_submissions(submissions, thresholds, comparable=comparable)
            tp, fp, fn = score_holds(holds, duplicates)
            rows.append(SweepRow(similarity, tolerance, len(holds), tp, fp, fn))
    return tuple(rows)


def _ratio(numerator: int, denominator: int) -> Decimal:
    return Decimal(1) if denominator == 0 else Decimal(numerator) / Decimal(denominator)
