"""Cards for every surface (Slack Block Kit, Teams Adaptive Cards, plain text), built from typed card data.

Pure: imports nothing of ours; no I/O.
"""
