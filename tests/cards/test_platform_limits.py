"""The platform limits in countersign/cards/platform_limits.py are Slack's own, as slack_sdk's block models enforce
them."""

from slack_sdk.models.blocks import Block, ButtonElement, ContextBlock, HeaderBlock, SectionBlock

from countersign.cards import platform_limits as limits


def test_slack_limits_match_the_slack_sdk_block_models() -> None:
    assert HeaderBlock.text_max_length == limits.SLACK_HEADER_TEXT_CHARS
    assert SectionBlock.text_max_length == limits.SLACK_SECTION_TEXT_CHARS
    assert SectionBlock.fields_max_length == limits.SLACK_FIELDS_PER_SECTION
    assert ContextBlock.elements_max_length == limits.SLACK_ELEMENTS_PER_CONTEXT
    assert ButtonElement.text_max_length == limits.SLACK_BUTTON_TEXT_CHARS
    assert ButtonElement.value_max_length == limits.SLACK_BUTTON_VALUE_CHARS
    assert limits.SLACK_ID_CHARS == Block.block_id_max_length == ButtonElement.action_id_max_length


def test_every_limit_names_its_unit() -> None:
    names = [name for name in vars(limits) if name.isupper()]
    assert names, "no limits found"
    assert all(name.endswith(("_CHARS", "_BYTES")) or "_PER_" in name for name in names), names
