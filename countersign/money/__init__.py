"""Money as people read it: an amount with its currency, to the currency's ISO 4217 minor units.

One formatter for every room that shows an amount (cards, the CLI, reasons and findings). Imports nothing of ours;
every room may import it.
"""
