"""Each chat platform's limits, named once, with the unit in the name.

`…_CHARS` are counted as countersign/cards/text.py counts them: UTF-16 code units, which is never fewer than Python's
characters
and is how Slack and Teams measure text. `…_BYTES` are bytes of the UTF-8 JSON we send. The other names count things
(`…_PER_…`). Card modules import these; caps that are our own choice (how many lines a card shows, how long one
line may be) stay beside the card that makes the choice.
"""

from __future__ import annotations

# --- Slack Block Kit (slack_sdk.models.blocks; api.slack.com/reference/block-kit) -------------------------------

SLACK_HEADER_TEXT_CHARS = 150  # header block: plain_text of at most 150 characters
SLACK_SECTION_TEXT_CHARS = 3000  # section block `text`; also our cap for a message's notification fallback `text`
SLACK_FIELD_TEXT_CHARS = 2000  # each of a section's `fields`
SLACK_FIELDS_PER_SECTION = 10  # a section takes at most 10 fields
SLACK_ELEMENTS_PER_CONTEXT = 10  # a context block takes at most 10 elements
SLACK_BUTTON_TEXT_CHARS = 75  # button `text`
SLACK_BUTTON_VALUE_CHARS = 2000  # button `value`
SLACK_ID_CHARS = 255  # `action_id` and `block_id`
SLACK_BLOCKS_PER_MESSAGE = 50  # blocks in one message
SLACK_URL_CHARS = 3000  # a button's `url`
SLACK_VIEW_TITLE_CHARS = 24  # a modal's `title`, `submit` and `close`
SLACK_PRIVATE_METADATA_CHARS = 3000  # a view's `private_metadata`
SLACK_INPUT_LABEL_CHARS = 2000  # an input block's `label` and `hint`
SLACK_PLACEHOLDER_CHARS = 150  # an input element's `placeholder`
SLACK_TEXT_INPUT_CHARS = 3000  # the most a plain_text_input's `max_length` may be
SLACK_BLOCKS_PER_VIEW = 100  # blocks in one modal

# --- Microsoft Teams / Adaptive Cards ----------------------------------------------------------------------------

# Teams answers 413 MessageSizeTooBig above its bot message size limit (documented as 40 KB, later 100 KB with 80 KB
# recommended, of the UTF-16 payload); the Teams connector's posting limit is about 28 KB. We keep a whole card
# under 28,000 bytes of UTF-8 JSON, below every published figure.
TEAMS_CARD_BYTES = 28_000

# Our own cap, shared by the Teams cards: one TextBlock or fallback text (Adaptive Cards set no length of their own).
TEAMS_TEXT_CHARS = 2000

# Teams refreshes a card automatically for at most 60 users (`refresh.userIds`); past that a person refreshes by hand.
TEAMS_USERS_PER_REFRESH = 60
