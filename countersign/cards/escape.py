"""Text from documents made inert for each platform's markup: the one place cards escape data.

Documents fill many card fields (a payment run's entity is the contractor's certificate id; vendor and account names,
memos, descriptions, narratives, clause titles, reasons). None of it may reach a card as markup: not a mention
(`<!channel>`, `<@U…>`), not a link (`<https://x|click>`, a bare URL Slack would auto-link), not formatting that
makes a forged line look like the card's own (`*bold*`, `_italic_`, `~strike~`, a code span).

Slack (mrkdwn): `slack_data` escapes &, < and > as &amp; &lt; &gt; (Slack's own escaping, after which nothing can open
a mention or a link) and replaces the four formatting characters with look-alikes that Slack does not read as markup
(`SLACK_LOOK_ALIKES`: Slack has no escape for them); every mrkdwn text object that carries data is sent with
`verbatim: true` (`slack_mrkdwn_object`), so Slack does not auto-link bare URLs or channel names in it.
`slack_own` escapes only &, < and > for text the code writes itself from identifiers and policy (statuses, tiers,
roles), whose underscores are not data.

Teams (Adaptive Cards 1.5): `TextBlock` text and `FactSet` facts are read as markdown, `TextRun`s never are. Data goes
only into `teams_data_run`s inside a `RichTextBlock` (`teams_data_block`); `teams_markdown` backslash-escapes the
markdown specials for the rare text of ours that must sit in a TextBlock and may hold a character of data.
"""

from __future__ import annotations

from typing import Any

SLACK_ENTITIES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"))
# Slack's formatting characters and the look-alikes data shows instead (asterisk operator, modifier letter low macron,
# tilde operator, modifier letter grave accent): read by a person as the same text, never by Slack as markup.
SLACK_LOOK_ALIKES = {"*": "\u2217", "_": "\u02cd", "~": "\u223c", "`": "\u02cb"}
_SLACK_DATA = str.maketrans({**dict(SLACK_ENTITIES), **SLACK_LOOK_ALIKES})
_SLACK_OWN = str.maketrans(dict(SLACK_ENTITIES))
# Every ASCII punctuation character CommonMark lets a backslash escape.
_MARKDOWN_SPECIALS = "\\`*_{}[]()#+-.!|<>~:"
_TEAMS_MARKDOWN = str.maketrans({char: f"\\{char}" for char in _MARKDOWN_SPECIALS})


def slack_data(text: str) -> str:
    """Data for Slack mrkdwn: no mention, link or formatting can open in it."""
    return text.translate(_SLACK_DATA)


def slack_own(text: str) -> str:
    """Our own text for Slack mrkdwn (identifiers, statuses, policy wording): only &, < and > escaped."""
    return text.translate(_SLACK_OWN)


def slack_mrkdwn_object(text: str) -> dict[str, Any]:
    """A mrkdwn text object, verbatim: Slack parses only the markup we wrote, and auto-links nothing."""
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def teams_markdown(text: str) -> str:
    """Text for a Teams TextBlock with every markdown special backslash-escaped."""
    return text.translate(_TEAMS_MARKDOWN)


def teams_data_run(text: str, **options: Any) -> dict[str, Any]:
    """Data as a TextRun: Adaptive Cards never read a TextRun as markdown."""
    return {"type": "TextRun", "text": text or " ", **options}


def teams_data_block(runs: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
    return {"type": "RichTextBlock", "inlines": runs, **options}
