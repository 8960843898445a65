"""The chat doors: Slack and Microsoft Teams. Each parses a platform request, calls one use case in `services`, and
renders the answer as a card or a line of text; `delivery` posts the outbox's cards and updates them.

May import services, callbacks (identity checks), cards, policy and audit; never the engine's tables directly.
"""
