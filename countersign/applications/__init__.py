"""Pay applications as people send them: CSV files, XLSX workbooks and text PDFs of a valuation table, read into
the certificate JSON records `certificates.parse_certificate` takes, each figure carrying where it came from.

Reads files; imports nothing of ours but `certificates`. The layout is `countersign.applications.layout`'s, documented
in
docs/pay-applications.md (ADR 0027).
"""

from countersign.applications.errors import ApplicationError
from countersign.applications.reading import (
    ApplicationFormat,
    ReadCertificate,
    application_format,
    certificates_jsonl,
    read_application_file,
    read_application_files,
)

__all__ = [
    "ApplicationError",
    "ApplicationFormat",
    "ReadCertificate",
    "application_format",
    "certificates_jsonl",
    "read_application_file",
    "read_application_files",
]
