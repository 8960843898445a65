"""The Close Board: a door like `countersign/bot/`, serving server-rendered pages to people in a browser.

Closes and payment runs across entities, a "waiting on me" inbox, a page per close and per gate with its evidence
and charts, passkey enrolment and sign-in, and decisions signed with a passkey. Every read and decision goes through
the services room the other doors share; the board never touches the engine's tables or the decision writer.

Imports services, cards, records, money, policy and audit; never engine, callbacks, bot or web (ADR 0026).
"""
