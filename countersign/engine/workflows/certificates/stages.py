"""The payment-certificate workflow's name and its stages, in the order its file (`certificates.yaml`) runs them."""

WORKFLOW = "certificates"

INTAKE = "intake"
EXTRACTION = "extraction"
DUPLICATE_CHECK = "duplicate_check"
RECONSTRUCTION = "reconstruction"
CLAUSE_RETRIEVAL = "clause_retrieval"
ADJUDICATION = "adjudication"
PAYMENT = "payment"

STAGES = (INTAKE, EXTRACTION, DUPLICATE_CHECK, RECONSTRUCTION, CLAUSE_RETRIEVAL, ADJUDICATION, PAYMENT)
