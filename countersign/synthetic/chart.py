from dataclasses import dataclass


@dataclass(frozen=True)
class Account:
    code: str
    name: str
    type: str
    subtype: str


ACCOUNTS: tuple[Account, ...] = (
    Account("1000", "Cash - Operating", "asset", "cash"),
    Account("1010", "Cash - Payroll", "asset", "cash"),
    Account("1100", "Accounts Receivable", "asset", "receivable_control"),
    Account("1300", "Intercompany Receivable", "asset", "intercompany_receivable"),
    Account("2000", "Accounts Payable", "liability", "payable_control"),
    Account("2100", "Accrued Liabilities", "liability", "accrued_liabilities"),
    Account("2300", "Intercompany Payable", "liability", "intercompany_payable"),
    Account("3000", "Retained Earnings", "equity", "equity"),
    Account("4000", "Product Revenue", "revenue", "revenue"),
    Account("4100", "Service Revenue", "revenue", "revenue"),
    Account("5000", "Cost of Goods Sold", "expense", "cogs"),
    Account("6000", "Salaries", "expense", "opex"),
    Account("6100", "Rent", "expense", "opex"),
    Account("6200", "Software Subscriptions", "expense", "opex"),
    Account("6300", "Travel", "expense", "opex"),
    Account("6400", "Professional Fees", "expense", "opex"),
    Account("6500", "Utilities", "expense", "opex"),
    Account("6600", "Marketing", "expense", "opex"),
)

ACCOUNT_NAMES: dict[str, str] = {account.code: account.name for account in ACCOUNTS}
CASH_ACCOUNTS: tuple[str, ...] = tuple(a.code for a in ACCOUNTS if a.subtype == "cash")
PNL_ACCOUNTS: tuple[str, ...] = tuple(a.code for a in ACCOUNTS if a.type in ("revenue", "expense"))
INTERCOMPANY_ACCOUNTS: tuple[str, ...] = tuple(
    a.code for a in ACCOUNTS if a.subtype in ("intercompany_receivable", "intercompany_payable")
)

OPERATING_CASH = "1000"
PAYROLL_CASH = "1010"
RECEIVABLE_CONTROL = "1100"
INTERCOMPANY_RECEIVABLE = "1300"
PAYABLE_CONTROL = "2000"
ACCRUED_LIABILITIES = "2100"
INTERCOMPANY_PAYABLE = "2300"
RETAINED_EARNINGS = "3000"
PRODUCT_REVENUE = "4000"
SERVICE_REVENUE = "4100"
COGS = "5000"
SALARIES = "6000"
PROFESSIONAL_FEES = "6400"
