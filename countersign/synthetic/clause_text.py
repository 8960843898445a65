"""The wording of the clause corpus: three templates per topic, and the defined terms each topic carries.

Templates are `str.format_map` strings. The placeholders are the form's nouns (`{employer}`, `{certifier}`,
`{pricing}`), the form's verb of obligation (`{shall}`: "shall", "must" or "will") and the form's parameters from
the clauses profile, already rendered (percentages as "5" or "2.5", amounts with their currency, `{valuation_day}`
as an ordinal). Templates of one topic differ in structure and vocabulary, not only in nouns, as the conditions of
different standard forms do; the seed picks a template per form. Text never names a form code or a clause number; a
cross-reference names the other topic in words.
"""

from __future__ import annotations

from typing import Final

TEMPLATES: Final[dict[str, tuple[str, ...]]] = {
    # Retention
    "retention.rate": (
        "The {certifier} {shall} deduct retention at the Retention Percentage of {retention_percent}% from the "
        "value of work executed and of materials on site included in each interim certificate. Retention is not "
        "deducted from amounts for fluctuations or from interest on late payment. The sum retained accrues from "
        "certificate to certificate until it is released under the provisions for release of retention.",
        "The Retention Percentage is {retention_percent} per cent. In every interim valuation the {employer} may "
        "keep back that share of the gross value of the works properly executed, including unfixed goods, before "
        "the amount payable to the Contractor is worked out. No other withholding may be described as retention, "
        "and retention is never charged twice on the same value.",
        "Retention is deducted at the rate stated in the Contract Data as the Retention Percentage, which is "
        "{retention_percent}%. It applies to (a) the price for work done to date and (b) the value of unfixed "
        "materials, but not to (c) any advance, interest or fluctuation amount. The Contractor shows the "
        "deduction on every application.",
    ),
    "retention.cap": (
        "The total retention held by the {employer} {shall} not exceed the Retention Limit, which is "
        "{retention_cap_percent}% of the Contract Sum. Once the Retention Limit is reached no further retention "
        "is deducted from interim certificates, and any excess deducted in error is repaid in the next "
        "certificate.",
        "Retention ceases to accrue when the aggregate amount kept back equals {retention_cap_percent} per cent "
        "of the Contract Sum, which is the Retention Limit. The {certifier} checks this ceiling on every "
        "certificate; a certificate that would take cumulative retention above it is reduced to the ceiling "
        "before it is issued.",
        "Retention stops being deducted once the retention held reaches the Retention Limit. For this contract "
        "the Retention Limit is {retention_cap_percent}% of the Contract Sum, adjusted only when the Contract "
        "Sum itself is adjusted. Any amount held above it {shall} be returned with the next payment.",
    ),
    "retention.release_practical_completion": (
        "On the issue of the certificate of Practical Completion, the {certifier} {shall} include in the next "
        "interim certificate the release of {retention_release_percent}% of the total retention then held. The "
        "remainder continues to be held as security for making good defects until the end of the Defects "
        "Rectification Period.",
        "When the works reach Practical Completion, {retention_release_percent} per cent of the accumulated "
        "retention becomes payable to the Contractor with the following interim payment. Where only a section of "
        "the works is handed over, the release applies proportionately to the value of that section, and the "
        "rest stays with the {employer}.",
        "Upon Practical Completion of the whole of the works, the {employer} pays the Contractor "
        "{retention_release_percent}% of the retention held at that date. For sectional completion, the amount "
        "released is that percentage of the retention attributable to the section. The payment is made in the "
        "first interim certificate after Practical Completion.",
    ),
    "retention.release_defects_end": (
        "The balance of retention {shall} be released when the Defects Rectification Period of "
        "{defects_period_months} months has expired and the {certifier} has certified that all notified defects "
        "have been made good. It is included in the next certificate after that certificate of making good and "
        "paid by the final date for that certificate.",
        "Once the {defects_period_months}-month Defects Rectification Period ends and every listed defect is "
        "remedied, the remaining retention is returned to the Contractor. If defects remain outstanding, the "
        "{employer} may keep back only a sum reasonably reflecting the cost of putting them right and must pay "
        "the rest without delay.",
        "The remaining retention {shall} be paid to the Contractor on the later of (a) the end of the Defects "
        "Rectification Period, which lasts {defects_period_months} months, and (b) the issue of the certificate "
        "that all notified defects are corrected. The {certifier} certifies the amount within 14 days of the "
        "later date.",
    ),
    "retention.bond": (
        "The Contractor may provide a Retention Bond in the form annexed to these conditions instead of having "
        "retention deducted. The bond amount {shall} equal the Retention Limit of {retention_cap_percent}% of "
        "the Contract Sum, and while a valid Retention Bond is in place no retention is deducted from interim "
        "certificates.",
        "In lieu of cash retention the {employer} accepts a Retention Bond from an approved surety for "
        "{retention_cap_percent} per cent of the Contract Sum. If the bond is not delivered by the first "
        "valuation, or lapses before the end of the Defects Rectification Period, retention is deducted as if no "
        "bond had ever been given.",
        "Where the Contract Particulars say so, the Contractor gives a Retention Bond and no cash retention is "
        "held. The Retention Bond {shall} be for {retention_cap_percent}% of the Contract Sum, be issued by a "
        "surety approved by the {employer}, and expire no earlier than the end of the Defects Rectification "
        "Period.",
    ),
    "retention.trust": (
        "The {employer} holds retention as trustee for the Contractor and {shall} place it in a separate "
        "Retention Trust Account within {retention_trust_days} days of each deduction. The money in the "
        "Retention Trust Account may not be used for any other purpose and is not available to the {employer}'s "
        "creditors on insolvency.",
        "Sums retained are trust money. Within {retention_trust_days} days of the first deduction the {employer} "
        "opens a Retention Trust Account with a clearing bank, tells the Contractor its details, and keeps the "
        "balance equal to the retention recorded in the latest certificate until every part of it has been "
        "released.",
        "Retention is held on trust. The {employer} {shall} (a) open a Retention Trust Account within "
        "{retention_trust_days} days of the first deduction, (b) pay each deduction into it, and (c) give the "
        "Contractor a statement of the balance on request. The {employer} is not entitled to any interest earned "
        "on that account.",
    ),
    # Advance payment
    "advance.amount": (
        "The {employer} {shall} make an Advance Payment to the Contractor of {advance_percent}% of the Contract "
        "Sum for mobilisation. The Advance Payment is paid within 14 days after the Contractor delivers the "
        "Advance Payment Guarantee and an invoice, and it is recovered by deduction from interim payments.",
        "An interest-free Advance Payment of {advance_percent} per cent of the Contract Sum is made to help the "
        "Contractor mobilise and order long-lead items. It is not a payment for work done, is not subject to "
        "retention, and is repaid through deductions from interim certificates as described in the provisions on "
        "advance repayment.",
        "If the Contract Particulars provide for it, the {employer} {shall} pay the Contractor an Advance "
        "Payment equal to {advance_percent}% of the Contract Sum. The payment falls due on the later of the "
        "start date and delivery of the Advance Payment Guarantee. It does not reduce the Contract Sum.",
    ),
    "advance.security": (
        "Before any Advance Payment is made the Contractor {shall} deliver an Advance Payment Guarantee from a "
        "bank approved by the {employer}, for the full amount of the advance. The guarantee may reduce by the "
        "amounts repaid as shown in interim certificates and must remain valid until the advance has been repaid "
        "in full.",
        "No advance is paid until the {employer} holds an Advance Payment Guarantee in the agreed form. Its "
        "value equals the advance still outstanding. If the guarantee is due to expire before full repayment, "
        "the Contractor extends it, failing which the {employer} may call it for the unrepaid balance.",
        "The Contractor {shall} obtain and deliver an Advance Payment Guarantee, issued by a bank acceptable to "
        "the {employer}, before the Advance Payment becomes due. The guaranteed amount reduces automatically by "
        "each repayment certified. The {employer} may make a demand under it only for amounts of the advance "
        "that remain unrepaid.",
    ),
    "advance.amortisation_start": (
        "Repayment of the Advance Payment {shall} begin with the first interim certificate in which the "
        "cumulative value certified, excluding the advance and before retention, exceeds "
        "{advance_repayment_start_percent}% of the Contract Sum. No deduction for the advance is made from "
        "certificates issued before that threshold is reached.",
        "Deductions to recover the advance start once work certified to date passes "
        "{advance_repayment_start_percent} per cent of the Contract Sum. The {certifier} identifies the "
        "certificate in which the threshold is first crossed and shows the first repayment on it, together with "
        "the cumulative value that triggered it.",
        "Recovery of the Advance Payment {shall} not start until the total value of work certified, before "
        "retention and excluding the advance itself, first exceeds {advance_repayment_start_percent}% of the "
        "Contract Sum. The certificate that crosses that figure is the first in which any advance deduction is "
        "made.",
    ),
    "advance.amortisation_rate": (
        "From the certificate in which repayment begins, the {certifier} {shall} deduct "
        "{advance_repayment_rate_percent}% of the gross amount of each interim certificate, before retention, "
        "until the Advance Payment is repaid. The deduction is shown as a separate line so that the balance "
        "outstanding can be traced.",
        "Each interim payment after the repayment threshold is reduced by {advance_repayment_rate_percent} per "
        "cent of the value of that certificate, calculated on the amount for work and materials before any "
        "retention. The amount recovered is cumulative and is shown against the original advance on every "
        "certificate.",
        "The amount of the Advance Payment recovered through each certificate is "
        "{advance_repayment_rate_percent}% of the value of work and materials certified in that certificate, "
        "taken before retention. The {certifier} {shall} show the running total recovered and the balance still "
        "outstanding.",
    ),
    "advance.full_repayment": (
        "The Advance Payment {shall} be fully repaid by the time the cumulative value certified reaches "
        "{advance_full_repayment_percent}% of the Contract Sum. If deductions at the agreed rate would leave a "
        "balance at that point, the whole balance is deducted from the next interim certificate.",
        "By the certificate that takes the total certified value to {advance_full_repayment_percent} per cent of "
        "the Contract Sum, the advance must have been recovered in full. Any shortfall is recovered in that "
        "certificate, and no certificate may deduct more than the part of the advance still outstanding.",
        "The Advance Payment {shall} be fully recovered before the value certified reaches "
        "{advance_full_repayment_percent}% of the Contract Sum. If at that point any part is still outstanding, "
        "it is deducted in full in the next certificate, and no certificate deducts more than the balance then "
        "owing.",
    ),
    "advance.termination": (
        "If the Contract is terminated for any reason before the Advance Payment has been repaid, the whole "
        "outstanding balance {shall} become immediately due from the Contractor to the {employer}. The "
        "{employer} may recover it from any sum otherwise due or by calling the Advance Payment Guarantee.",
        "On termination, any part of the advance not yet recovered is a debt payable by the Contractor within 14 "
        "days. It is brought into the account after termination, and to the extent it remains unpaid the "
        "{employer} may claim it under the Advance Payment Guarantee.",
        "Where the Contractor's employment is terminated, or the Contract is ended by either party, any Advance "
        "Payment not yet recovered {shall} fall due at once. The {employer} may deduct it in the account after "
        "termination and, for any part still unpaid, make a demand under the Advance Payment Guarantee.",
    ),
    # Valuation of work executed
    "valuation.work_executed": (
        "Each interim valuation {shall} include the total value of work properly executed up to the valuation "
        "date, valued at the rates and prices in the {pricing}. Work that is defective, not yet carried out, or "
        "not in accordance with the Contract is excluded until it is corrected.",
        "The {certifier} values work done up to the valuation date by applying the quantities actually completed "
        "to the rates in the {pricing}. Only work carried out in accordance with the Contract counts; defective "
        "or incomplete work carries no value until it is put right.",
        "The amount due for work is assessed by the {certifier} at each assessment date as the price of the work "
        "completed, taken from the {pricing}. Work not complete, not tested where testing is required, or not "
        "meeting the Works Information {shall} be left out of the assessment.",
    ),
    "valuation.measurement": (
        "Work {shall} be measured in accordance with the Method of Measurement stated in the {pricing}, and the "
        "quantities used in a valuation are the net quantities actually fixed in place. Any departure from the "
        "Method of Measurement must be expressly stated against the item concerned.",
        "The Method of Measurement named in the Contract Particulars governs how quantities are taken. "
        "Measurement is of the net finished work as built, without allowance for waste, and the Contractor's "
        "surveyor may attend any measurement and agree the dimensions recorded.",
        "Quantities are calculated as the net quantities of finished work in accordance with the Method of "
        "Measurement. Each item in the {pricing} {shall} be measured in the units stated against it, and the "
        "Contractor's measurements are checked jointly with the {certifier} before they are used.",
    ),
    "valuation.quantity_overrun": (
        "Where the quantity of an item measured exceeds the quantity in the {pricing} by more than "
        "{quantity_overrun_percent}%, the rate for the excess {shall} be reviewed and a new rate agreed. Until a "
        "revised rate is agreed, quantities above the stated amount are valued at the original rate only on the "
        "{certifier}'s written confirmation.",
        "Quantities in the {pricing} are estimates. If measured work exceeds the stated quantity of an item by "
        "more than {quantity_overrun_percent} per cent, the excess is not paid automatically at the tendered "
        "rate: the {certifier} assesses a fair rate for it, and the overrun must be supported by measurement "
        "records.",
        "The Contractor {shall} notify the {certifier} as soon as it becomes apparent that the final quantity of "
        "any item will exceed the quantity given in the {pricing} by more than {quantity_overrun_percent}%. For "
        "the quantity above that margin, the {certifier} fixes a rate having regard to any changed cost.",
    ),
    "valuation.cumulative_basis": (
        "Every interim valuation {shall} be cumulative, stating the gross value of all work and materials to "
        "date rather than the work of the period alone. The amount due is that gross value less retention, less "
        "the cumulative advance repayment and less the total of amounts previously certified.",
        "Interim valuations are prepared on a cumulative basis. Each one restates the gross valuation from the "
        "start of the works, so that corrections and later measurements are absorbed automatically and the "
        "payment for the period is found by difference from the previous certificate.",
        "The amount due at each assessment date is the total of (a) the price for work done to date, (b) other "
        "amounts due to date, less (c) amounts to be retained or repaid, and less (d) the total of earlier "
        "payments. Each assessment {shall} therefore restate the full value to date.",
    ),
    "valuation.provisional_sums": (
        "Each Provisional Sum in the {pricing} {shall} be expended only on the {certifier}'s instruction. Work "
        "carried out against a Provisional Sum is valued as a variation and the Provisional Sum is omitted, so "
        "that the Contract Sum is adjusted by the difference.",
        "A Provisional Sum is an allowance for work that cannot be fully described at tender. It carries no "
        "entitlement to payment by itself: the {certifier} instructs the work, it is valued on the rules for "
        "variations, and any unexpended balance is deducted in the final account.",
        "The {certifier} {shall} instruct the expenditure of each Provisional Sum, and no part of it is spent "
        "otherwise. The instructed work is valued under the rules for valuing variations, and the valuation "
        "replaces the Provisional Sum in the adjustment of the Contract Sum.",
    ),
    "valuation.boq_errors": (
        "Any error in description or quantity in the {pricing}, or any omission from it, {shall} be corrected "
        "and the correction treated as a variation. No error in the Contractor's own pricing, arithmetic or "
        "rates is corrected, and the Contractor is bound by the rates as tendered.",
        "If the {pricing} departs from the Method of Measurement or contains a mistake in quantity or "
        "description, the mistake is rectified and valued as if it were a variation. Mistakes made by the "
        "Contractor in calculating its own prices remain at the Contractor's risk.",
        "An error in the {pricing}, whether in description, quantity or by omission, {shall} be put right by the "
        "{certifier} and treated as a change to the works. The rates, prices and extensions inserted by the "
        "Contractor are not adjusted for the Contractor's own mistakes.",
    ),
    # Rates
    "rates.rate_card": (
        "The Rate Card attached to the {pricing} {shall} set out the rates for labour, plant and materials used "
        "to value additional work not covered by an item in the {pricing}. Rates in the Rate Card include "
        "overheads and profit unless the entry states otherwise.",
        "Where no item in the {pricing} applies, work is priced from the Rate Card, which lists unit rates by "
        "trade, grade and item of plant. The Rate Card in force on the date the work was carried out is the one "
        "that applies, and its rates are fixed for the duration of that version.",
        "The Rate Card lists the hourly rates for each grade of labour and item of plant and the prices of "
        "common materials. It is used to value work for which the {pricing} has no applicable rate, and its "
        "rates {shall} be treated as including all overheads and profit.",
    ),
    "rates.versions": (
        "The Rate Card may be revised only by a new Rate Card Version agreed by the {employer} and issued by the "
        "{certifier} with an Effective Date. A new version {shall} not take effect until at least "
        "{rate_version_notice_days} days after it is issued, and work carried out before its Effective Date is "
        "valued at the earlier rates.",
        "Every Rate Card Version carries a version number and an Effective Date. The Contractor gives "
        "{rate_version_notice_days} days' notice of any proposed revision; once agreed, the revised rates apply "
        "to work executed on or after the Effective Date and never to work valued in an earlier certificate.",
        "Rate Card revisions take effect only through a numbered Rate Card Version accepted by the {employer}. "
        "The {certifier} records for each version its Effective Date, which {shall} be at least "
        "{rate_version_notice_days} days after acceptance. Work is valued at the version in force on the date it "
        "was carried out.",
    ),
    "rates.superseded": (
        "A rate that has been replaced by a later Rate Card Version {shall} not be applied to work executed "
        "after the Effective Date of the replacement. Where a valuation has used a superseded rate, the "
        "{certifier} corrects the amount in the next interim certificate.",
        "Superseded rates cease to apply from the Effective Date of the version that replaces them. Any item "
        "valued at a rate no longer in force is revalued at the current rate, and the difference is adjusted in "
        "the following certificate rather than by a separate payment.",
        "A superseded rate is one replaced by a later Rate Card Version. From the Effective Date of the "
        "replacement, the superseded rate {shall} not be used in any valuation, and an amount already valued at "
        "it is corrected in the next certificate.",
    ),
    "rates.dayworks": (
        "Where the {certifier} instructs that work be valued as Dayworks, it is valued at the prime cost of "
        "labour plus {dayworks_labour_percent}% and of materials plus {dayworks_materials_percent}%. Daywork "
        "sheets {shall} be delivered for verification within {dayworks_sheet_days} days of the work being done.",
        "Dayworks are paid only when instructed. The Contractor records hours, plant and materials on signed "
        "sheets submitted within {dayworks_sheet_days} days, and the amount is prime cost with percentage "
        "additions of {dayworks_labour_percent} per cent on labour and {dayworks_materials_percent} per cent on "
        "materials.",
        "Dayworks are valued at prime cost plus {dayworks_labour_percent}% on labour and "
        "{dayworks_materials_percent}% on materials and goods. The Contractor {shall} give the {certifier} "
        "vouchers specifying the time spent and the materials used within {dayworks_sheet_days} days of the "
        "work, or the work is valued at rates the {certifier} considers fair.",
    ),
    "rates.fluctuations": (
        "Contract prices {shall} be adjusted for changes in the cost of labour and materials using the Price "
        "Adjustment Formula. No adjustment is made for any period in which the movement in the published index "
        "is less than {fluctuations_threshold_percent}%, and none applies to work carried out late through the "
        "Contractor's own delay.",
        "The Price Adjustment Formula applies to each interim valuation. Fluctuations below "
        "{fluctuations_threshold_percent} per cent of the base index are absorbed by the Contractor, and where "
        "the Contractor is in culpable delay the index for the completion date is used instead of the later one.",
        "Price adjustment under the Price Adjustment Formula {shall} be calculated for each assessment using the "
        "published indices. Where the change in the index over the base index is under "
        "{fluctuations_threshold_percent}%, the Contractor bears it, and no adjustment is made for work done "
        "after the completion date.",
    ),
    # Variations
    "variations.instruction": (
        "Only the {certifier} may instruct a variation, and every Variation Instruction {shall} be in writing. "
        "An oral instruction has no effect until the Contractor confirms it in writing and the {certifier} does "
        "not dissent within 7 days of that confirmation.",
        "A change to the design, quality or quantity of the works is made by a Variation Instruction issued in "
        "writing by the {certifier}. The Contractor complies with it promptly, unless it objects within seven "
        "days on reasonable grounds stated in writing.",
        "A Variation Instruction is an instruction from the {certifier} which changes the works or the "
        "conditions under which they are carried out. It {shall} be given in writing, and one given orally has "
        "effect only once confirmed in writing by either party.",
    ),
    "variations.valuation": (
        "A variation {shall} be valued at the rates in the {pricing} where the work is of similar character and "
        "carried out under similar conditions, at rates derived from them where it is not, and at a fair "
        "valuation only where neither applies. Dayworks are used only if the work cannot properly be measured.",
        "To value a variation the {certifier} uses the tendered rates for similar work, adjusts them for "
        "differences in conditions or quantity, and otherwise agrees a fair rate with the Contractor. A "
        "quotation accepted before the work starts fixes the value.",
        "Variations are valued by the {certifier}. Where there is a rate in the {pricing} for work of similar "
        "character and conditions, that rate applies. Where there is none, a rate is derived from the {pricing} "
        "or, failing that, from the Rate Card, and the Contractor's quotation, if accepted, {shall} prevail.",
    ),
    "variations.omissions": (
        "Where a variation omits work, the {certifier} {shall} deduct its value at the rates in the {pricing}. "
        "If the omission makes other rates unreasonable, those rates are adjusted, but the Contractor is not "
        "paid for profit on omitted work.",
        "Omitted work and reduced quantities are valued at the tendered rates and deducted from the Contract "
        "Sum. The {employer} may not omit work in order to have it carried out by another contractor, and the "
        "Contractor may claim any loss caused by such an omission.",
        "Omitted work {shall} be valued at the rates in the {pricing} and deducted from the Contract Sum. Where "
        "the omission substantially changes the conditions under which the remaining work is carried out, the "
        "rates for the remaining work may be adjusted.",
    ),
    "variations.unauthorised": (
        "Work carried out without a Variation Instruction {shall} not be valued or included in any certificate. "
        "The {certifier} may instruct its removal at the Contractor's cost, or may sanction it in writing, in "
        "which case it is valued as a variation from the date of sanction.",
        "The Contractor is not entitled to payment for additional work done on its own initiative. Such work "
        "appears in a valuation only after the {certifier} confirms it by a Variation Instruction, and until "
        "then its value is excluded even if it has been measured.",
        "Without a Variation Instruction the Contractor {shall} not alter the works. Any alteration made without "
        "one has no value in an assessment, and the {certifier} may either require it to be undone at the "
        "Contractor's expense or confirm it in writing after the event.",
    ),
    "variations.notice": (
        "If the Contractor considers that an instruction or event entitles it to additional payment, it {shall} "
        "give notice within {variation_notice_days} days of becoming aware of it. A claim notified late is not "
        "included in any interim certificate and is considered only in the final account.",
        "Notice of any claim for a variation or additional payment must reach the {certifier} within "
        "{variation_notice_days} days of the instruction or event. The notice states the cause and an estimate "
        "of the amount, and is followed by a detailed build-up within a further 28 days.",
        "The Contractor {shall} notify any event or instruction for which it seeks additional payment within "
        "{variation_notice_days} days of becoming aware of it. If notice is not given within that time, the "
        "Contractor is not entitled to a change in the prices for that event.",
    ),
    # Materials
    "materials.on_site": (
        "The value of materials delivered to the site for incorporation in the works {shall} be included in "
        "interim valuations, provided they are adequately stored, protected and not prematurely delivered. Site "
        "Materials are valued at their invoiced cost, supported by delivery notes.",
        "Unfixed goods on site count towards an interim valuation when they are intended for the works, properly "
        "protected against weather and theft, and delivered reasonably close to when they will be fixed. The "
        "{certifier} values such Site Materials at cost as evidenced by invoices.",
        "Site Materials are materials delivered to the site and intended for the works but not yet incorporated. "
        "Their value {shall} be included in an interim valuation only where they are reasonably, properly and "
        "not prematurely delivered, and are adequately protected against the weather and other casualties.",
    ),
    "materials.vesting": (
        "Site Materials whose value has been included in a certificate that the {employer} has paid {shall} "
        "become the property of the {employer}. The Contractor may not remove them from site without the "
        "{certifier}'s written consent, and remains responsible for their loss or damage.",
        "Ownership of unfixed materials passes to the {employer} when their value has been paid. Before that, "
        "the Contractor warrants that it has good title to them, free of any charge, lien or retention of title "
        "claim by a supplier or sub-contractor.",
        "Title in Site Materials passes to the {employer} when their value has been paid. From that time the "
        "Contractor {shall} not remove them from site except for use on the works, and it keeps them at its own "
        "risk.",
    ),
    "materials.incorporation": (
        "When Site Materials are fixed in the works, their value {shall} be removed from the materials line and "
        "included in the value of work executed. The same materials must never be valued both as unfixed "
        "materials and as completed work in one certificate.",
        "Materials previously paid for as unfixed are reversed out of the valuation when they are incorporated, "
        "and their value is then carried in the measured work. The {certifier} reconciles the materials schedule "
        "against the measured work at each valuation to avoid double counting.",
        "The {certifier} {shall} deduct from the materials value in each valuation the value of any materials "
        "fixed since the previous valuation. Fixed materials are paid for in the measured work only, so that no "
        "material is paid for twice.",
    ),
    "materials.off_site": (
        "The value of Materials Off Site {shall} be included in a certificate only if they are Listed Items, are "
        "set apart and marked for the works at the supplier's premises, and the Contractor has provided a bond "
        "of {off_site_bond_amount} in favour of the {employer}. Ownership of them must first have passed to the "
        "Contractor.",
        "Materials Off Site may be paid for before delivery if they appear on the list of Listed Items, are "
        "insured, are clearly labelled as intended for the works, and are secured by a bond for "
        "{off_site_bond_amount}. Without that bond, no payment is made for goods held away from the site.",
        "Materials Off Site are paid for only where (a) they are Listed Items, (b) title has passed to the "
        "Contractor, (c) they are insured and marked as for the works, and (d) the Contractor has given a bond "
        "for {off_site_bond_amount}. The {certifier} {shall} not include them otherwise.",
    ),
    "materials.insurance": (
        "The Contractor {shall} insure all unfixed materials on and off site against loss and damage for their "
        "full replacement value. Where the value of any materials has been certified, the {employer} is named as "
        "joint insured under that policy.",
        "Materials not yet built in remain at the Contractor's risk. They are covered by the Contractor's all "
        "risks insurance at full value, and if any are lost after payment, the Contractor replaces them at its "
        "own cost without further payment.",
        "The Contractor {shall} keep every unfixed item on site, in transit or in store insured for its full "
        "value against all risks. A certificate of that insurance is produced before any unfixed materials are "
        "included in a valuation.",
    ),
    # Interim payment
    "payment.valuation_dates": (
        "Interim valuations {shall} be made as at the Interim Valuation Date, which is the {valuation_day} day "
        "of each month from the month after the works start until Practical Completion, and every two months "
        "after that. The due date of each payment is fixed by reference to the Interim Valuation Date.",
        "The Interim Valuation Date falls on the {valuation_day} of every month. The {certifier} values the "
        "works as at that date whether or not the Contractor has applied, until the final certificate is issued, "
        "and a date falling on a weekend moves to the next working day.",
        "The Interim Valuation Date is the {valuation_day} day of each month, starting with the first month "
        "after the start date. The {certifier} {shall} value the works as at each Interim Valuation Date until "
        "the issue of the Final Certificate.",
    ),
    "payment.application": (
        "The Contractor may submit an Interim Application not later than {application_days} days before each "
        "Interim Valuation Date, stating the sum it considers due and the basis on which that sum has been "
        "calculated. The {certifier} {shall} take any timely Interim Application into account in the valuation.",
        "At least {application_days} days before each valuation date the Contractor sends the {certifier} an "
        "Interim Application, with a detailed breakdown against the {pricing} and supporting records. A late "
        "application is treated as made for the following valuation date.",
        "The Contractor {shall} submit an Interim Application to the {certifier} at least {application_days} "
        "days before each Interim Valuation Date. The Interim Application states the sum the Contractor "
        "considers due and shows the calculation by item of the {pricing}.",
    ),
    "payment.due_date": (
        "The Due Date for each interim payment {shall} be {due_date_days} days after the relevant Interim "
        "Valuation Date. The sum due is the amount stated in the Payment Notice or, if no Payment Notice is "
        "given, the amount in the Contractor's Interim Application.",
        "Each interim payment becomes due {due_date_days} days after the valuation date, and that date is the "
        "Due Date. The Due Date is the reference point for the payment and pay less notices and for the final "
        "date for payment.",
        "Interim payments become due on the Due Date, which {shall} be {due_date_days} days after each Interim "
        "Valuation Date. The notified sum on the Due Date is the sum in the Payment Notice, or in the Interim "
        "Application where no Payment Notice is issued.",
    ),
    "payment.final_date": (
        "The Final Date for Payment of each interim payment {shall} be {final_date_days} days after its Due "
        "Date. The {employer} must pay the notified sum no later than the Final Date for Payment, less only any "
        "amount stated in a valid Pay Less Notice.",
        "The {employer} pays each certified sum within {final_date_days} days of the Due Date, and the last day "
        "of that period is the Final Date for Payment. Payment is made by bank transfer, and a sum is treated as "
        "paid only when cleared funds reach the Contractor's account.",
        "The {employer} {shall} pay each interim payment by the Final Date for Payment, which is "
        "{final_date_days} days after the Due Date. Payment made after that date is late, whatever the reason "
        "for the delay, and the date funds are credited to the Contractor counts as the date of payment.",
    ),
    "payment.notice": (
        "Not later than {payment_notice_days} days after each Due Date, the {certifier} {shall} issue a Payment "
        "Notice stating the sum considered due at the Due Date and the basis on which it was calculated. The "
        "Payment Notice is issued even if the sum is zero.",
        "Within {payment_notice_days} days of the Due Date the {certifier} gives the Contractor a Payment "
        "Notice. It shows the gross valuation, retention, advance recovered and amounts previously certified, so "
        "that the sum due can be checked against the {pricing}.",
        "Each Payment Notice {shall} reach the Contractor within {payment_notice_days} days of the Due Date. It "
        "sets out the amount the {certifier} considers to have been owed on that date and how that amount was "
        "arrived at item by item; a Payment Notice for a nil amount is still required.",
    ),
    "payment.pay_less": (
        "If the {employer} intends to pay less than the notified sum, it {shall} give a Pay Less Notice not "
        "later than {pay_less_days} days before the Final Date for Payment. The Pay Less Notice specifies the "
        "sum the {employer} considers due and how that sum was calculated.",
        "The {employer} may withhold part of a notified sum only by a Pay Less Notice served at least "
        "{pay_less_days} days before the final date. A notice served late, or without a calculation of the "
        "reduced amount, is of no effect and the full notified sum must be paid.",
        "A Pay Less Notice {shall} be given no later than {pay_less_days} days before the Final Date for "
        "Payment. It states the sum the {employer} considers due and the basis of calculation. Without a valid "
        "Pay Less Notice, the {employer} pays the notified sum in full.",
    ),
    "payment.late_interest": (
        "If the {employer} fails to pay any sum by the Final Date for Payment, it {shall} pay simple interest on "
        "the unpaid amount at {interest_margin_percent}% a year above the Reference Rate, from the final date "
        "until payment is made. Interest is a debt and is not subject to retention.",
        "Late payment carries interest at the Reference Rate plus {interest_margin_percent} per cent a year, "
        "calculated daily from the day after the final date until the day cleared funds arrive. The parties "
        "agree that this is a substantial remedy for late payment.",
        "Any sum not paid by the Final Date for Payment {shall} carry simple interest at "
        "{interest_margin_percent}% a year over the Reference Rate from that date until payment. Interest is "
        "recoverable as a debt and is due whether or not the Contractor has demanded it.",
    ),
    "payment.suspension": (
        "If the {employer} does not pay a sum due in full by the Final Date for Payment, the Contractor may "
        "suspend all or part of the works after giving at least {suspension_notice_days} days' written notice of "
        "its intention and the grounds. The right ends when payment is made in full.",
        "Non-payment by the final date entitles the Contractor to stop work. It must first give written notice "
        "of at least {suspension_notice_days} days; the period of suspension extends the time for completion, "
        "and work resumes within a reasonable time after the overdue sum is paid.",
        "Where a sum due is not paid in full by the Final Date for Payment, the Contractor may suspend "
        "performance after giving at least {suspension_notice_days} days' written notice stating the grounds. "
        "The suspension ends once the sum has been paid in full.",
    ),
    "payment.certificate_content": (
        "Each Interim Certificate {shall} state the gross valuation, the retention deducted, the advance "
        "repayment, the total of amounts previously certified and the net sum due. No Interim Certificate is "
        "required where the net sum due is less than {minimum_certificate_amount}, except the certificate at "
        "Practical Completion.",
        "An Interim Certificate sets out, in this order: gross value of work and materials, retention, advance "
        "recovered, amounts previously certified, and the net amount now due. Where the net amount is below "
        "{minimum_certificate_amount} the {certifier} may carry it forward to the next certificate.",
        "An Interim Certificate {shall} show (a) gross value to date, (b) retention, (c) advance recovered, (d) "
        "the total of earlier certificates, and (e) the net amount now due. An Interim Certificate need not be "
        "issued where the net amount is less than {minimum_certificate_amount}.",
    ),
    # Set-off
    "setoff.right": (
        "The {employer} may deduct from any sum due to the Contractor under this Contract any amount which the "
        "Contractor is liable to pay to the {employer} under it. No set-off may be made in respect of claims "
        "under any other contract or against any other company.",
        "The {employer} is entitled to set off against payments due to the Contractor sums the Contractor owes "
        "under this Contract, including liquidated damages and the cost of remedying defects. That right is "
        "exercisable only where a Pay Less Notice has been given.",
        "The {employer} may withhold from any payment to the Contractor an amount that the Contractor owes the "
        "{employer} under this Contract, such as the cost of work done by others in the Contractor's default. "
        "Amounts owed under any other contract {shall} not be set off, and every deduction is subject to the "
        "notice provisions.",
    ),
    "setoff.notice": (
        "Any set-off {shall} be notified in writing not later than {setoff_notice_days} days before the Final "
        "Date for Payment, stating each ground and the amount attributable to it. A set-off not so notified may "
        "not be made against that payment.",
        "Before exercising set-off the {employer} gives written notice at least {setoff_notice_days} days before "
        "the final date, itemising the amounts and the reasons for each. This notice may be combined with a Pay "
        "Less Notice but cannot be given after the payment has fallen due.",
        "The {employer} {shall} give written notice of any intended set-off at least {setoff_notice_days} days "
        "before the Final Date for Payment. The notice states each amount and the grounds for it, and it may "
        "form part of a Pay Less Notice.",
    ),
    "setoff.limit": (
        "The total set off against any one interim payment {shall} not exceed {setoff_limit_percent}% of the sum "
        "otherwise due, and only amounts that are quantified and properly supported may be deducted. "
        "Unliquidated claims are deferred to the final account or resolved by adjudication.",
        "Set-off is capped at {setoff_limit_percent} per cent of the payment against which it is made. Any "
        "balance is carried forward to later payments, and disputed amounts that have not been ascertained "
        "cannot be deducted at all.",
        "The {employer} {shall} not withhold by set-off more than {setoff_limit_percent}% of any payment otherwise "
        "due. Only sums that have been ascertained, in amount and in liability, may be set off; the rest of a claimed "
        "deduction is carried forward to later payments or left to adjudication.",
    ),
    # Previously certified and duplicate amounts
    "certified.previous": (
        "The sum due in each interim certificate {shall} be the cumulative gross amount less retention, less "
        "advance repaid and less the total of all amounts Previously Certified. The amount Previously Certified "
        "is taken from the last certificate issued, whether or not it has been paid.",
        "From the cumulative valuation the {certifier} deducts everything Previously Certified, as shown on the "
        "most recent certificate. A sum certified but not yet paid is still deducted as Previously Certified, "
        "and the unpaid balance is recovered as a debt rather than certified again.",
        "The net amount of each certificate is the cumulative gross value less retention and less advance "
        "recovered, less the sum Previously Certified. The sum Previously Certified {shall} be the sum stated in "
        "the last certificate issued, paid or not.",
    ),
    "certified.duplicate": (
        "The Contractor {shall} not be paid twice for the same work, materials or costs. Where an item has been "
        "included under more than one heading, in more than one application or under both measured work and "
        "Dayworks, the duplicate amount is removed and any overpayment is recovered in the next certificate.",
        "No item of work may be valued more than once. The {certifier} checks each application against earlier "
        "certificates, variations and daywork sheets, and any amount paid twice is deducted as soon as it is "
        "found, whichever party discovers it.",
        "No work, materials or cost is to be paid for twice. The {certifier} removes from each valuation any "
        "item already included elsewhere in it or in an earlier valuation, and a duplicated amount already paid "
        "is recovered by deduction.",
    ),
    "certified.correction": (
        "The {certifier} may correct any error in an earlier certificate in any later certificate, and {shall} "
        "do so where an amount has been wrongly included or omitted. No certificate other than the Final "
        "Certificate is conclusive evidence that any work has been properly executed.",
        "Any interim certificate may be modified by a later one. A correction is made by adjusting the "
        "cumulative valuation, not by a separate payment, and the reason for the correction is noted on the "
        "certificate that makes it.",
        "An interim certificate may be corrected by a later certificate, including correction of an amount "
        "previously certified in error or of an item left out. The {certifier} {shall} state on the later "
        "certificate what was corrected, by how much and why, and the Contractor may ask for a correction it "
        "believes is owed.",
    ),
    "certified.packages": (
        "For valuation the works are divided into the Work Packages listed in the {pricing}. Each item of work "
        "{shall} belong to exactly one Work Package, and the value certified against a Work Package may not "
        "exceed its price without an instruction.",
        "The {pricing} groups the works into Work Packages, each with a defined scope and price. Valuations "
        "report progress by Work Package; work outside the scope of every package is treated as a variation and "
        "must not be absorbed into another package's value.",
        "Work Packages are the parcels into which the {pricing} divides the works for valuation and reporting. "
        "An item of work {shall} be assigned to a single Work Package, and any package whose certified value "
        "would run above its price needs an instruction first. Work fitting no package is a variation.",
    ),
    "certified.arithmetic": (
        "Every certificate {shall} be arithmetically consistent: the item values add up to the gross valuation, "
        "and the net sum due equals the gross valuation less the deductions stated on it. Amounts are stated in "
        "{currency} to two decimal places, and rounding is applied only to the net sum.",
        "The net sum due is calculated as gross valuation minus retention, minus advance repayment, minus "
        "amounts previously certified. Where the figures on a certificate do not add up, the correct arithmetic "
        "prevails over the stated total and the {certifier} issues a corrected certificate.",
        "In every certificate the item values {shall} add up to the gross value, and the net sum due equals the "
        "gross value less the deductions stated. Where the figures disagree, the arithmetically correct figure "
        "prevails and the {certifier} issues a corrected certificate.",
    ),
    # Completion, defects and final account
    "completion.practical": (
        "Practical Completion occurs when the works are complete for all practical purposes, save for minor "
        "defects that do not prevent their use, and the {certifier} has issued a certificate saying so. The date "
        "stated in that certificate {shall} start the Defects Rectification Period.",
        "The {certifier} certifies Practical Completion when the works can be used for their intended purpose "
        "and the Contractor has supplied the health and safety file and as-built drawings. Only trivial "
        "outstanding items may remain, listed in a schedule attached to the certificate.",
        "Practical Completion is achieved when the {certifier} certifies that the works are complete, except for "
        "minor items that do not affect their use. The certificate {shall} state the date of Practical "
        "Completion, and the Defects Rectification Period starts on that date.",
    ),
    "completion.defects_period": (
        "The Defects Rectification Period {shall} be {defects_period_months} months from the date of Practical "
        "Completion. During it the {certifier} may notify the Contractor of any defects that appear, and a "
        "schedule of defects is delivered not later than 14 days after the period ends.",
        "A Defects Rectification Period of {defects_period_months} months runs from Practical Completion. Any "
        "defect, shrinkage or fault caused by materials or workmanship not in accordance with the Contract that "
        "appears within it is notified to the Contractor.",
        "The Defects Rectification Period is {defects_period_months} months from Practical Completion. Defects "
        "that appear within the Defects Rectification Period {shall} be notified to the Contractor by the "
        "{certifier}, no later than 14 days after the period expires.",
    ),
    "completion.making_good": (
        "The Contractor {shall} make good, at its own cost, all defects notified during the Defects "
        "Rectification Period within a reasonable time after receiving the schedule of defects. When they are "
        "made good, the {certifier} issues a certificate of making good.",
        "Defects are remedied within the time stated in the notice. If the Contractor fails to do so, the "
        "{employer} may employ others to do the work and recover the cost from the Contractor, including by "
        "deduction from the remaining retention.",
        "Notified defects {shall} be made good by the Contractor at its own cost within the time stated by the "
        "{certifier}. If the Contractor does not comply, the {employer} may have the work done by others and "
        "deduct the cost from sums due to the Contractor.",
    ),
    "completion.final_account": (
        "Within {final_account_months} months after Practical Completion the Contractor {shall} send the "
        "{certifier} all documents needed to prepare the Final Account. The Final Certificate is issued after "
        "the certificate of making good and states the Contract Sum as finally adjusted and the balance due to "
        "either party.",
        "The Final Account adjusts the Contract Sum for all variations, provisional sums, fluctuations and "
        "claims. The Contractor submits its draft within {final_account_months} months of Practical Completion, "
        "and the balance stated in the Final Certificate is payable by the final date as for an interim payment.",
        "The Contractor {shall} submit the Final Account within {final_account_months} months after Practical "
        "Completion. The {certifier} issues the Final Certificate, stating the final Contract Sum and the "
        "balance due, within 28 days of the later of the certificate of making good and receipt of the Final "
        "Account.",
    ),
    "completion.liquidated_damages": (
        "If the works are not complete by the completion date, the Contractor {shall} pay or allow Liquidated "
        "Damages at {liquidated_damages_per_week} for every week or part of a week until Practical Completion. "
        "The {employer} may deduct them from any sum due, provided a Pay Less Notice has been given.",
        "Liquidated Damages for late completion are fixed at {liquidated_damages_per_week} per week. They are a "
        "genuine pre-estimate of loss, are the {employer}'s sole remedy for delay, and are repaid if the "
        "completion date is later extended.",
        "Liquidated Damages are payable at {liquidated_damages_per_week} per week for each week between the "
        "completion date and Practical Completion. The {employer} {shall} give a Pay Less Notice before "
        "deducting them from a payment. If the completion date is later extended, damages for the extended "
        "period are repaid.",
    ),
    # Administration
    "admin.records": (
        "The Contractor {shall} keep full records of labour, plant, materials, measurements and payments "
        "relating to the works for {records_years} years after the Final Certificate. The {employer}, the "
        "{certifier} and any auditor appointed by the {employer} may inspect and copy those records at "
        "reasonable times.",
        "Accounts and records supporting every application, daywork sheet and variation are retained for "
        "{records_years} years from completion of the final account. They are open to audit by the {employer}'s "
        "representatives on five working days' notice.",
        "The Contractor {shall} keep records of time, materials, plant and payments for {records_years} years "
        "after the Final Certificate. The {employer} and its auditors may examine and copy them on reasonable "
        "notice, and the Contractor gives them any explanation reasonably needed to follow an entry.",
    ),
    "admin.notices": (
        "Every notice under this Contract {shall} be in writing and delivered by hand, by recorded post or by "
        "email to the address stated in the Contract Particulars. A notice sent by email is treated as received "
        "on the next working day after it is sent.",
        "Notices, certificates and instructions are communicated in writing through the agreed electronic system "
        "or by post. A communication takes effect when it is received, and a notice that is required but not "
        "given cannot be replaced by conduct.",
        "Notices {shall} be in writing and delivered by hand, post or email to the address in the Contract "
        "Particulars. A notice takes effect when it is received at that address, and a party that changes its "
        "address tells the other in writing.",
    ),
    "admin.disputes": (
        "Either party may at any time refer a dispute under this Contract to adjudication. The Adjudicator "
        "{shall} reach a decision within 28 days of the referral, and the decision is binding until the dispute "
        "is finally determined by legal proceedings or by agreement.",
        "A dispute about any certificate, notice or valuation may be referred to an Adjudicator nominated by the "
        "agreed nominating body. The parties comply with the Adjudicator's decision pending final determination, "
        "and the {certifier} gives effect to it in the next certificate.",
        "A party may refer a dispute to an Adjudicator at any time, including a dispute about a Payment Notice "
        "or a Pay Less Notice. The Adjudicator's decision {shall} be binding until the dispute is finally "
        "determined by the courts or by agreement, and the parties comply with it meanwhile.",
    ),
    "admin.tax": (
        "The Contract Sum is exclusive of VAT. The {employer} {shall} pay VAT properly chargeable on each "
        "payment in addition to the sum due, against a valid VAT invoice or under the domestic reverse charge "
        "where it applies.",
        "All amounts stated in certificates exclude VAT. VAT is added at the rate in force on the date of "
        "supply, and where the domestic reverse charge applies the {employer} accounts for it directly to the "
        "tax authority instead of paying it to the Contractor.",
        "Amounts in this Contract are exclusive of VAT. The {employer} {shall} pay any VAT chargeable on each "
        "payment, or account for it under the reverse charge where that applies. The Contractor issues a VAT "
        "invoice or an authenticated receipt for every payment it receives.",
    ),
    "admin.insurance": (
        "The Contractor {shall} insure the works and materials in joint names against all risks for their full "
        "reinstatement value, plus {insurance_fees_percent}% for professional fees, until Practical Completion. "
        "Evidence of cover is supplied before work starts and at each renewal.",
        "Until Practical Completion the works are insured in the joint names of the {employer} and the "
        "Contractor for their full reinstatement value with an addition of {insurance_fees_percent} per cent to "
        "cover professional fees. Insurance money received is applied to reinstating the damaged work.",
        "The works {shall} be insured in joint names for their full reinstatement value plus "
        "{insurance_fees_percent}% for professional fees. The cover runs from the start date until Practical "
        "Completion, and the Contractor produces the policy and the premium receipts whenever the {employer} "
        "asks.",
    ),
    "admin.performance_bond": (
        "Within 14 days of the date of the Contract the Contractor {shall} deliver a Performance Bond for "
        "{performance_bond_percent}% of the Contract Sum. No payment is due to the Contractor until the "
        "Performance Bond is delivered, and it remains in force until Practical Completion.",
        "The Contractor provides a Performance Bond from an approved surety in a value equal to "
        "{performance_bond_percent} per cent of the Contract Sum. The {employer} may withhold interim payments "
        "while the bond is outstanding and may call it if the Contractor defaults.",
        "As security for due performance the Contractor {shall} procure a Performance Bond, in the annexed form, "
        "in a sum equal to {performance_bond_percent}% of the Contract Sum. The bond secures the Contractor's "
        "obligations until Practical Completion, and failure to procure it is a default entitling the {employer} "
        "to suspend payment.",
    ),
    "admin.termination_account": (
        "After termination the {certifier} {shall} prepare an account of the value of work properly executed, "
        "the cost of completion by others and any loss suffered by the {employer}. Until that account is "
        "settled, the {employer} is not bound to make any further payment.",
        "When the Contractor's employment ends, an account is drawn up setting the value of work done and "
        "materials supplied against amounts already paid and costs caused by the termination. The resulting "
        "balance is paid by or to the Contractor within 28 days of the account.",
        "Following termination, the {certifier} {shall} prepare an account of (a) the value of work done, (b) "
        "the cost of completing the works by others, and (c) any direct loss to the {employer}. The balance is "
        "paid to the party entitled to it.",
    ),
}

# Defined terms a reader searches for verbatim: every template of the topic carries each of them.
DEFINED_TERMS: Final[dict[str, tuple[str, ...]]] = {
    "retention.rate": ("Retention Percentage",),
    "retention.cap": ("Retention Limit",),
    "retention.release_practical_completion": ("Practical Completion",),
    "retention.release_defects_end": ("Defects Rectification Period",),
    "retention.bond": ("Retention Bond",),
    "retention.trust": ("Retention Trust Account",),
    "advance.amount": ("Advance Payment",),
    "advance.security": ("Advance Payment Guarantee",),
    "advance.termination": ("Advance Payment Guarantee",),
    "valuation.measurement": ("Method of Measurement",),
    "valuation.provisional_sums": ("Provisional Sum",),
    "rates.rate_card": ("Rate Card",),
    "rates.versions": ("Rate Card Version", "Effective Date"),
    "rates.superseded": ("Effective Date",),
    "rates.dayworks": ("Dayworks",),
    "rates.fluctuations": ("Price Adjustment Formula",),
    "variations.instruction": ("Variation Instruction",),
    "variations.unauthorised": ("Variation Instruction",),
    "materials.on_site": ("Site Materials",),
    "materials.off_site": ("Materials Off Site", "Listed Items"),
    "payment.valuation_dates": ("Interim Valuation Date",),
    "payment.application": ("Interim Application",),
    "payment.due_date": ("Due Date",),
    "payment.final_date": ("Final Date for Payment",),
    "payment.notice": ("Payment Notice",),
    "payment.pay_less": ("Pay Less Notice",),
    "payment.late_interest": ("Reference Rate",),
    "payment.certificate_content": ("Interim Certificate",),
    "certified.previous": ("Previously Certified",),
    "certified.packages": ("Work Package",),
    "completion.practical": ("Practical Completion",),
    "completion.defects_period": ("Defects Rectification Period",),
    "completion.final_account": ("Final Account", "Final Certificate"),
    "completion.liquidated_damages": ("Liquidated Damages",),
    "admin.disputes": ("Adjudicator",),
    "admin.tax": ("VAT",),
    "admin.performance_bond": ("Performance Bond",),
}
