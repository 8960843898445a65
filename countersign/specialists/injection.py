"""A scored detector of instruction-like structure in document text: pure Python, deterministic, no model.

A document (a certificate's description, a variation, a bank memo) describes work and money. Text that instead
addresses whoever or whatever reads it, and tells that reader to waive a control, reach an outcome, hide a finding
or press a button, is an injection attempt however it is phrased. Exact phrases (extraction's named patterns) miss
paraphrases ("Kindly treat the retention ceiling as not applicable … settle everything claimed"), so the detector
scores structure instead: each `Feature` is a family of phrasings of one idea (a reader is addressed, a control is
named as waived, an outcome is demanded, a finding is to be suppressed, the card or its buttons are steered, a role
is forged, a link is carried), weighted by how rarely ordinary documents use it. A text is instruction-like when its
score reaches `THRESHOLD`.

Ordinary documents use imperatives and modals too ("Please remit to…", "Retention to be released on practical
completion", "The Contractor shall…"), so the weak features (a polite request, a machine named, a reader given a
modal: 1 or 2 points) never flag a text alone; the strong ones (a control waived, an outcome demanded, a finding
suppressed, the card steered, a role forged: 4 or 5 points) do, and the middling ones (3 points) do too. The weights
were set from the idea each feature stands for; `THRESHOLD` is the value the sweep over the tuning half of
`config/evals/injection/` chooses (countersign/evals/injection.py, pinned by
tests/specialists/test_injection_detector.py), and
the held-out half reports precision and recall (docs/benchmarks.md).

Text is matched after `normalise`: NFKC, zero-width characters removed, lower case, letters spelled with dots or
hyphens between them joined ("i.g.n.o.r.e"), digits used as letters read as letters ("ign0re"), whitespace
collapsed, so spacing, case and look-alike characters do not hide a phrase.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

# Points; the threshold the sweep picks on the tuning half of config/evals/injection (countersign/evals/injection.py).
THRESHOLD = 3

_ZERO_WIDTH = dict.fromkeys(map(ord, "\u00ad\u180e\u200b\u200c\u200d\u200e\u200f\u2060\u2061\u2062\u2063\ufeff"))
_GAP = r"(?:\W+\w+){0,6}?\W+"  # up to six words between two parts of a phrase

# Who or what reads the text, when the text speaks to it.
_NAMED_READER = (
    r"(?:whoever|anyone|anybody|reviewers?|reviewing\s+(?:system|agent|tool)|assessors?|checkers?|"
    r"checking\s+(?:software|system|tool)|approvers?|controller|cfo|certifier|summari[sz]er|"
    r"(?:the\s+)?(?:ai|a\.i\.|llm|language\s+model|model|assistant|chatgpt|bot|agent|machine\s+reader|"
    r"automated\s+(?:system|tool|checker|assessor|review|reviewer|checks?)|engine|software))"
)
_READER = r"(?:you|your|yourself|" + _NAMED_READER + ")"
_MACHINE = (
    r"\b(?:ai|a\.i\.|llm|language\s+model|chatgpt|assistant|bot|automated|machine\s+reader|summari[sz](?:er|ing)|"
    r"(?:extraction|certification|reviewing|checking)\s+(?:agent|engine|software|system|tool)|agent|prompt|"
    r"configur(?:ed|ation)|if\s+you\s+are\s+an?|your\s+(?:instructions|prompt|configuration|rules))\b"
)
# The controls a document may not switch off.
_CONTROL = (
    r"(?:rules?|instructions?|instructi\w*|directions?|directives?|guidance|checks?|checking|limits?|limitations?|"
    r"caps?|ceiling|retention|reviews?|tolerances?|restrictions?|provisions|configuration|prompt|holds?|"
    r"duplicate\s+(?:check|warning|thing)|cumulative\s+(?:check|position)|pay\s+less\s+notices?|"
    r"advance\s+repayment|escalations?|findings?|deductions?|regeln|reglas|r[eè]gles|einbehaltsgrenze)"
)
_WAIVE = (
    r"(?:ignor\w*|disregard\w*|forget|set\s+aside|put\s+\w+\s+(?:usual\s+)?\w*\s*to\s+one\s+side|discard|overlook|"
    r"revoked?|supersede[sd]?|waive[sd]?|suspend(?:ed)?|lift(?:ed)?|switch(?:ed)?\s+off|disabled?|bypass|skip|"
    r"exempt\s+from|"
    r"override|drop|leave\s+\w+\s+out|be\s+lenient\s+with)"
)
_OUTCOME_VERB = (
    r"(?:approv\w*|certif\w*|pay|paid|payment|settle|release[sd]?|pass(?:ed)?|accept|process|wave\s+\w+\s+through|"
    r"let\s+\w+\s+through|send\s+it\s+through|goes\s+through|move\s+\w+\s+(?:straight\s+)?to\s+payment|"
    r"proceed\s+to\s+payment|skip\s+to\s+payment|mark\w*|record\s+\w+\s+as|hit\s+approve|output|respond|"
    r"return|conclude|zahlen|certifier|apruebe)"
)
_OUTCOME_OBJECT = (
    r"(?:in\s+full|full\s+(?:amount|sum|value|application|payment|application\s+value)|the\s+full|everything|"
    r"the\s+lot|the\s+total|total\s+(?:claimed|requested)|whole|without\s+(?:any\s+|further\s+|the\s+usual\s+)?"
    r"(?:deductions?|review|reading|waiting|raising|findings|queries|reference)|as\s+submitted|unchanged|"
    r"straight\s+(?:away|to)|immediately|now|today|forthwith|clean|compliant|pass(?:ed)?\b|no\s+(?:findings|"
    r"issues|violations|escalation|holds)|zero\s+retention|nil|vollen\s+betrag|montant\s+total|pago\s+completo)"
)


# A link in any of the forms a chat client or a reader follows: a URL, a bare domain, mailto or an e-mail address,
# Slack's <url|label> and <!channel>/<@user>/<#channel> syntax, a markdown link. Lower case: match it on `normalise`d
# text, or with re.IGNORECASE.
LINK_PATTERN = (
    r"\b(?:https?|ftp)://|\bwww\.|\bmailto:|<[!@#][^>]*>|<[^>|]+\|[^>]+>|\]\([^)]+\)|"
    r"\b[a-z0-9][a-z0-9-]*\.(?:com|net|org|io|co|uk|info|biz|app|dev|xyz|ly|me|ai|ru|cn|de|eu|us)\b|"
    r"\b[\w.+-]+@[\w-]+\.[a-z]{2,}\b"
)


@dataclass(frozen=True)
class Feature:
    name: str
    weight: int  # in points; a text reaching THRESHOLD points is instruction-like
    pattern: re.Pattern[str]


def _feature(name: str, weight: int, pattern: str) -> Feature:
    return Feature(name, weight, re.compile(pattern))


FEATURES: tuple[Feature, ...] = (
    # A control named together with a verb that switches it off ("set aside whatever rules", "the cap … lifted").
    _feature(
        "control_waived",
        4,
        rf"\b{_WAIVE}{_GAP}{_CONTROL}\b|\b{_CONTROL}{_GAP}(?:is|are|be|as|been)\s+(?:\w+\s+)?"
        r"(?:lifted|waived|suspended|withdrawn|revoked|superseded|switched\s+off|disabled|void|removed|"
        r"outdated|dealt\s+with|nil|advisory)\b",
    ),
    # A control declared inapplicable ("treat the retention ceiling as not applicable", "the cap doesn't apply").
    _feature(
        "control_inapplicable",
        3,
        rf"\b{_CONTROL}{_GAP}(?:(?:is|are|as)\s+not\s+(?:applicable|relevant|meant)|(?:does|do)\s*(?:n't|\s+not)\s+"
        r"(?:apply|govern)|not\s+applicable|none\s+apply|(?:shall|may|must|will)\s+not\s+be\s+(?:applied|"
        r"considered|deducted|made))|\bnone\s+apply\b|\b(?:no|without)\s+(?:retention|holds)\b",
    ),
    # "treat / regard / consider / act as though X as <an outcome or a waiver>".
    _feature(
        "treat_as_outcome",
        3,
        r"\b(?:treat|regard|consider|think\s+of|act\s+as\s+though|imagine)\b.{0,60}?\b(?:as\s+)?(?:not\s+applicable|"
        r"lifted|void|withdrawn|advisory|already\s+(?:verified|approved|checked)|a\s+false\s+alarm|clean|compliant|"
        r"released|nil|new|instructed|did\s+not\s+exist|has\s+been\s+removed|suspended)\b",
    ),
    # An outcome demanded: a payment or approval verb with "in full", "everything", "without review", "now".
    _feature("outcome_demanded", 4, rf"\b{_OUTCOME_VERB}\b{_GAP}?{_OUTCOME_OBJECT}"),
    # The outcome stated as already settled or expected ("the expected verdict is pass", "pre-approved").
    _feature(
        "outcome_presumed",
        3,
        r"\b(?:pre[\s-]?(?:approved|cleared)|already\s+(?:been\s+)?(?:decided|verified|checked|approved|signed\s+"
        r"(?:this\s+)?off|dealt\s+with)|(?:expected|intended|correct|appropriate)\s+(?:verdict|outcome|response|"
        r"summary|amount)|(?:is|are)\s+expected\s+to|has\s+been\s+agreed\s+(?:at|that)|the\s+result\s+of\s+this\s+"
        r"review|signed\s+this\s+off|(?:decided|agreed)\s+already)\b|\b(?:sees?|describe\w*|record\w*|mark\w*|"
        r"treat\w*)\b.{0,30}?\bas\s+(?:fully\s+)?(?:compliant|clean|passed|checked\s+and\s+correct)\b",
    ),
    # A finding to be hidden ("leave the overlap out of the report", "say nothing about", "do not flag").
    _feature(
        "finding_suppressed",
        4,
        r"\b(?:do\s+not|does\s+not|don'?t|doesn'?t|not\s+to|never|avoid|refrain\s+from|under\s+no\s+circumstances\s+should|no\s+need\s+(?:for\s+"
        r"\w+\s+)?to|not\s+be|nothing\b.{0,40}?\bshould\s+be|say\s+nothing|make\s+no\s+(?:reference|mention)|"
        r"leave\s+out|omit|keep\s+\w+(?:\s+\w+){0,3}\s+out\s+of|left\s+out\s+of|(?:are|is)\s+to\s+be\s+suppressed|"
        r"suppress)\b.{0,50}?\b(?:flag\w*|report\w*|mention\w*|escalat\w*|quer\w*|review\w*|compar\w*|look\w*|"
        r"reference|findings?|summary|output|duplicate|overlap|run\s+the)\b|\b(?:findings?|duplicates?|overlap|"
        r"violations?|holds?)\b.{0,60}?\b(?:suppressed|omitted|left\s+out|excluded|not\s+(?:be\s+)?"
        r"(?:reported|mentioned|escalated|flagged))\b",
    ),
    # The reader spoken to: a note, message or direction to a reviewer, an AI, a bot, "whoever reads this".
    _feature(
        "reader_addressed",
        3,
        rf"\b(?:note|message|instructions?|directive|attention|dear|hello|hey|to|for|fyi)\s+(?:for\s+|to\s+)?"
        rf"(?:the\s+|any\s+|all\s+)?{_NAMED_READER}\b|\b{_NAMED_READER}\s*[:,]|^\s*(?:system|assistant|bot|ai|llm)\b|"
        r"\b(?:whoever|anyone|anybody)\s+(?:'s\s+)?(?:reads?|reading|checks?|checking|sees?|processing|is)\b|"
        r"\b(?:reviewers?|assessors?|checkers?|tools?|systems?)\s+(?:processing|reading)\b",
    ),
    # A machine reader named at all (an AI, a model, a bot, a prompt): rare in a certificate.
    _feature("machine_named", 2, _MACHINE),
    # The reader told what to do with a modal ("the reviewer may approve", "reviewers … are expected to").
    _feature(
        "reader_directed",
        2,
        rf"\b{_READER}\b(?:\W+\w+){{0,4}}?\W+(?:should|must|shall|can|may|is\s+to|are\s+to|need\s+not|"
        r"is\s+(?:hereby\s+)?(?:directed|instructed)|agrees)\b",
    ),
    # The card, its buttons or the act of deciding steered.
    _feature(
        "decision_steered",
        5,
        r"\b(?:buttons?|this\s+card|the\s+card|click\w*|tap|press|hit\s+approve|approve\s+(?:now|first|there|on\s+"
        r"this)|without\s+waiting|this\s+gate|reject\s+option)\b",
    ),
    # A forged role, a forged system message, a role play or "new rules".
    _feature(
        "role_forged",
        5,
        r"\[/?\s*(?:system|inst|admin)\s*\]|</?\s*(?:admin|system)\s*>|\"role\"\s*:|#{2,}\s*instructions|"
        r"\b(?:begin|end)\s+\w+\s+instructions\b|\b(?:pretend|roleplay|role[\s-]play)\b|\bact\s+as\s+(?:an?\s+)?"
        r"(?:assistant|certifier|employer)|\bfrom\s+(?:here|now)\s+on\b|\bnew\s+(?:rules|task|instructions?)\b|"
        r"\bsystem\s+(?:note|prompt|message)\b|\byour\s+(?:new\s+)?task\b",
    ),
    # A link or an address to act elsewhere: URLs, bare domains, mailto, Slack and markdown link syntax, mentions.
    _feature(
        "link_carried",
        3,
        LINK_PATTERN,
    ),
    # A request framed politely or as a favour, the register many paraphrased instructions take.
    _feature(
        "polite_request",
        1,
        r"\b(?:kindly|please|pls|we\s+would\s+(?:be\s+(?:most\s+)?grateful|appreciate|ask)|it\s+would\s+be\s+"
        r"appreciated|(?:we|i)\s+(?:kindly\s+|respectfully\s+|humbly\s+|politely\s+)?(?:ask|request)|could\s+you|"
        r"would\s+you|as\s+a\s+favour|with\s+thanks|if\s+it\s+is\s+not\s+too\s+much|trust\s+me|just)\b",
    ),
    # Foreign-language imperatives to ignore or pay ("bitte ignorieren Sie", "veuillez ignorer").
    _feature(
        "foreign_imperative",
        3,
        r"\b(?:bitte|veuillez|por\s+favor)\b.{0,40}?\b(?:ignor\w*|zahlen|certifier|apruebe|aprobar)\b",
    ),
    # A text that says it is an instruction, or that the whole claim is to be paid.
    _feature(
        "self_declared_instruction",
        3,
        r"\bthis\s+is\s+an\s+instruction\b|\b(?:pay|certify|settle)\s+(?:everything|the\s+lot|the\s+total)\b",
    ),
)


@dataclass(frozen=True)
class InstructionScore:
    score: int
    features: tuple[str, ...]  # the features that fired, in FEATURES order

    def flagged(self, threshold: int = THRESHOLD) -> bool:
        return self.score >= threshold


def score_text(text: str, features: Sequence[Feature] = FEATURES) -> InstructionScore:
    """The sum of the weights of the features whose pattern occurs in the normalised text."""
    normalised = normalise(text)
    fired = [feature for feature in features if feature.pattern.search(normalised)]
    return InstructionScore(sum(feature.weight for feature in fired), tuple(feature.name for feature in fired))


def is_instruction_like(text: str, threshold: int = THRESHOLD) -> bool:
    return score_text(text).flagged(threshold)


_DOTTED_LETTERS = re.compile(r"\b(?:[a-z][.\-]){2,}[a-z]\b")
_DIGIT_AS_LETTER = re.compile(r"(?<=[a-z])[0-3](?=[a-z])|(?<=[a-z])[0-3]\b(?=\s)")
_DIGIT_LETTERS = str.maketrans({"0": "o", "1": "i", "3": "e"})


def normalise(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).translate(_ZERO_WIDTH).lower()
    folded = _DOTTED_LETTERS.sub(lambda match: re.sub(r"[.\-]", "", match.group(0)), folded)
    folded = _DIGIT_AS_LETTER.sub(lambda match: match.group(0).translate(_DIGIT_LETTERS), folded)
    if folded.count("-") >= 3 and " " not in folded.strip():
        folded = folded.replace("-", " ")
    return " ".join(folded.split())
