"""Helpers shared by integration tests."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from libs.db.uow import SqlAlchemyUnitOfWork

T = TypeVar("T")


async def eventually(
    probe: Callable[[], Awaitable[T]],
    done: Callable[[T], bool],
    *,
    timeout_s: float = 15.0,
    interval_s: float = 0.05,
) -> T:
    """Poll `probe` until `done(value)` or the deadline; returns the last value either way (assert on it)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    value = await probe()
    while not done(value) and loop.time() < deadline:
        await asyncio.sleep(interval_s)
        value = await probe()
    return value


class AcknowledgementLost:
    """Units of work whose next commit reaches the database while its caller hears only a lost connection
    (the server committed, then the connection dropped before the answer arrived)."""

    def __init__(self, real: Callable[[], SqlAlchemyUnitOfWork]) -> None:
        self._real = real
        self.lose_next = True

    def __call__(self) -> SqlAlchemyUnitOfWork:
        uow = self._real()
        commit = uow.commit

        async def commit_then_lose_the_answer() -> None:
            await commit()
            if self.lose_next:
                self.lose_next = False
                raise ConnectionResetError("connection lost before the commit was acknowledged")

        uow.commit = commit_then_lose_the_answer  # type: ignore[method-assign]
        return uow


def chromium() -> str | None:
    """Debian's headless Chromium (`.ci/run` installs it), or None."""
    import shutil

    return next((p for name in ("chromium", "chromium-browser") if (p := shutil.which(name))), None)


def rendered_dom(page: Path) -> str:
    """The DOM of an HTML file after headless Chromium loaded it and ran its scripts."""
    import subprocess

    browser = chromium()
    assert browser is not None, "chromium is not installed (apt-get install -y chromium)"
    done = subprocess.run(
        [
            browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--virtual-time-budget=10000", "--dump-dom", page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def dom_attribute(dom: str, element_id: str | None, name: str) -> str:
    """The value of attribute `name` on the element with `element_id` (None: the body)."""
    import re

    tag = r"<body\b[^>]*>" if element_id is None else rf'<[a-z]+\b[^>]*\bid="{element_id}"[^>]*>'
    match = re.search(tag, dom)
    assert match is not None, f"no element {element_id or 'body'} in the page"
    value = re.search(rf'\b{name}="([^"]*)"', match.group(0))
    assert value is not None, f"no {name} on {element_id or 'body'}: {match.group(0)}"
    return value.group(1)
