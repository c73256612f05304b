"""Bedrock Runtime and Vertex AI emulators that the real SDKs parse, with knobs for capacity and faults."""

from libs.emulators.control import EmulatorControl
from libs.emulators.server import RunningEmulators, serve, serve_forever

__all__ = ["EmulatorControl", "RunningEmulators", "serve", "serve_forever"]
