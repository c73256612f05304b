"""Cloud adapters behind one Provider protocol: Bedrock (aiobotocore) and Vertex AI (google-cloud-aiplatform)."""

from libs.providers.base import Chunk, Completion, Message, Provider, ProviderError, ProviderRequest, Usage
from libs.providers.bedrock import BedrockProvider
from libs.providers.registry import close_providers, open_provider, open_providers, reopen_changed
from libs.providers.vertex import VertexProvider

__all__ = [
    "BedrockProvider",
    "Chunk",
    "Completion",
    "Message",
    "Provider",
    "ProviderError",
    "ProviderRequest",
    "Usage",
    "VertexProvider",
    "close_providers",
    "open_provider",
    "open_providers",
    "reopen_changed",
]
