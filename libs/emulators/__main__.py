"""`python -m libs.emulators [--bedrock-port N] [--vertex-port N] [--host H]`: run both emulators until stopped.

Prints one JSON line with both URLs once they listen, so a parent process can wait for it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys

from libs.emulators.server import RunningEmulators, serve_forever


async def _main(args: argparse.Namespace) -> None:
    def announce(emulators: RunningEmulators) -> None:
        print(json.dumps({"bedrock": emulators.bedrock_url, "vertex": emulators.vertex_url}), flush=True)

    serving = asyncio.ensure_future(
        serve_forever(args.bedrock_port, args.vertex_port, host=args.host, seed=args.seed, on_ready=announce)
    )
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, serving.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await serving


def main(argv: list[str] | None = None) -> int:
    """Parse arguments and serve until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m libs.emulators", description=__doc__)
    parser.add_argument("--bedrock-port", type=int, default=0)
    parser.add_argument("--vertex-port", type=int, default=0)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--seed", type=int, default=0)
    asyncio.run(_main(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
