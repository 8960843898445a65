"""The subjects a construction contract's conditions cover: one clause per topic in every contract form.

A topic key names what a clause governs, independent of the form's numbering and wording. The clause corpus
(`countersign.synthetic.clauses`) writes one clause per (form, topic); the payment-certificate invariants name the
topics they
rest on, and a contract's clause references map each topic to the clause id of its own form.
"""

from __future__ import annotations

from typing import Final

# (topic key, short title). Order is the corpus order inside each form; keys never change once published.
TOPICS: Final[tuple[tuple[str, str], ...]] = (
    # Retention
    ("retention.rate", "Retention percentage"),
    ("retention.cap", "Retention limit"),
    ("retention.release_practical_completion", "Release of retention at practical completion"),
    ("retention.release_defects_end", "Release of retention at the end of the defects period"),
    ("retention.bond", "Retention bond in lieu of retention"),
    ("retention.trust", "Retention held in trust"),
    # Advance payment
    ("advance.amount", "Advance payment"),
    ("advance.security", "Advance payment guarantee"),
    ("advance.amortisation_start", "Start of advance repayment"),
    ("advance.amortisation_rate", "Rate of advance repayment"),
    ("advance.full_repayment", "Full repayment of the advance"),
    ("advance.termination", "Unrepaid advance on termination"),
    # Valuation of work executed
    ("valuation.work_executed", "Valuation of work executed"),
    ("valuation.measurement", "Method of measurement"),
    ("valuation.quantity_overrun", "Quantities exceeding the bill"),
    ("valuation.cumulative_basis", "Cumulative basis of interim valuations"),
    ("valuation.provisional_sums", "Provisional sums"),
    ("valuation.boq_errors", "Errors in the bill of quantities"),
    # Rates
    ("rates.rate_card", "Schedule of rates"),
    ("rates.versions", "Rate card versions and effective dates"),
    ("rates.superseded", "Superseded rates"),
    ("rates.dayworks", "Dayworks"),
    ("rates.fluctuations", "Price adjustment for fluctuations"),
    # Variations
    ("variations.instruction", "Instructions for variations"),
    ("variations.valuation", "Valuation of variations"),
    ("variations.omissions", "Omissions and reduced quantities"),
    ("variations.unauthorised", "Work without an instruction"),
    ("variations.notice", "Notice of a variation claim"),
    # Materials
    ("materials.on_site", "Materials on site"),
    ("materials.vesting", "Ownership of unfixed materials"),
    ("materials.incorporation", "Reversal on incorporation"),
    ("materials.off_site", "Materials off site"),
    ("materials.insurance", "Insurance of unfixed materials"),
    # Interim payment
    ("payment.valuation_dates", "Interim valuation dates"),
    ("payment.application", "Application for payment"),
    ("payment.due_date", "Due date for payment"),
    ("payment.final_date", "Final date for payment"),
    ("payment.notice", "Payment notice"),
    ("payment.pay_less", "Notice of intention to pay less"),
    ("payment.late_interest", "Interest on late payment"),
    ("payment.suspension", "Suspension for non-payment"),
    ("payment.certificate_content", "Contents of an interim certificate"),
    # Set-off
    ("setoff.right", "Right of set-off"),
    ("setoff.notice", "Notice of set-off"),
    ("setoff.limit", "Limits on set-off"),
    # Previously certified and duplicate amounts
    ("certified.previous", "Deduction of amounts previously certified"),
    ("certified.duplicate", "No payment twice for the same work"),
    ("certified.correction", "Correction of an earlier certificate"),
    ("certified.packages", "Work packages and their scope"),
    ("certified.arithmetic", "Arithmetic of certificates"),
    # Completion, defects and final account
    ("completion.practical", "Practical completion"),
    ("completion.defects_period", "Defects rectification period"),
    ("completion.making_good", "Making good defects"),
    ("completion.final_account", "Final account"),
    ("completion.liquidated_damages", "Liquidated damages"),
    # Administration
    ("admin.records", "Records and access for audit"),
    ("admin.notices", "Form of notices"),
    ("admin.disputes", "Adjudication of disputes"),
    ("admin.tax", "Value added tax"),
    ("admin.insurance", "Insurance of the works"),
    ("admin.performance_bond", "Performance bond"),
    ("admin.termination_account", "Account after termination"),
)

TOPIC_KEYS: Final[frozenset[str]] = frozenset(key for key, _ in TOPICS)
