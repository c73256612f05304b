"""Lists in pages: the continue token, and reading every page (in halves when a page is too large)."""

from __future__ import annotations

from typing import Any

import pytest

from libs.api.lists import InvalidContinue, continue_after, continue_token, read_pages


def test_a_token_names_where_its_page_ended():
    assert continue_after(continue_token("ml", "train-7")) == ("ml", "train-7")
    assert continue_after(continue_token("", "node-a")) == ("", "node-a")


@pytest.mark.parametrize("token", ["not base64 !", "bm90IGpzb24=", continue_token("ml", "x")[:-4] + "AAAA"])
def test_a_token_this_server_did_not_make_is_refused_in_the_api_servers_words(token):
    with pytest.raises(InvalidContinue, match=r"^continue key is not valid: "):
        continue_after(token)


class Server:
    """Serves 10 items in pages, refusing pages above `carries` items as the bus does."""

    def __init__(self, carries: int = 100) -> None:
        self.items = [{"name": f"item-{i}"} for i in range(10)]
        self.carries = carries
        self.limits: list[int | None] = []

    def ask(self, request: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
        limit = request["limit"]
        self.limits.append(limit)
        start = int(request["continue_token"] or 0)
        end = len(self.items) if limit is None else min(len(self.items), start + limit)
        if end - start > self.carries:
            raise TooLarge()
        return self.items[start:end], str(end) if end < len(self.items) else None


class TooLarge(Exception):
    error_type = "AnswerTooLarge"


def test_every_page_is_read_in_order():
    server = Server()

    items = read_pages(server.ask, {"kind": "Pod"}, 3)

    assert items == server.items
    assert server.limits == [3, 3, 3, 3]


def test_a_chunk_size_of_zero_asks_for_everything_at_once():
    server = Server()

    assert read_pages(server.ask, {"kind": "Pod"}, 0) == server.items
    assert server.limits == [None]


def test_a_page_the_bus_cannot_carry_is_asked_for_again_in_halves():
    server = Server(carries=2)

    items = read_pages(server.ask, {"kind": "Pod"}, 8)

    assert items == server.items
    assert server.limits[:3] == [8, 4, 2]


def test_other_errors_are_not_retried():
    def failing(_request: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
        raise RuntimeError("no route")

    with pytest.raises(RuntimeError):
        read_pages(failing, {"kind": "Pod"}, 8)
