"""The model gateway: every model call goes through a `Provider`, and every model-backed agent through `run_loop`.

Imports nothing of ours; events leave through the sink the caller passes.
"""

from countersign.llm.cassettes import RecordingProvider, ReplayProvider, cassette_set_hash, write_cassette
from countersign.llm.loop import Limits, LoopResult, LoopStopped, Sink, Tool, run_loop
from countersign.llm.messages import Message, ModelRequest, ModelResponse, ToolCall, ToolSpec
from countersign.llm.openai_compatible import OpenAICompatibleProvider
from countersign.llm.provider import AnswerTooLarge, NoRecordedResponse, Provider, ProviderError, ProviderUnavailable

__all__ = [
    "AnswerTooLarge",
    "Limits",
    "LoopResult",
    "LoopStopped",
    "Message",
    "ModelRequest",
    "ModelResponse",
    "NoRecordedResponse",
    "OpenAICompatibleProvider",
    "Provider",
    "ProviderError",
    "ProviderUnavailable",
    "RecordingProvider",
    "ReplayProvider",
    "Sink",
    "Tool",
    "ToolCall",
    "ToolSpec",
    "cassette_set_hash",
    "run_loop",
    "write_cassette",
]
