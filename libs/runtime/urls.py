"""URLs that carry credentials: put them in, mask them in output. Standard library only (the CLI's fast path)."""

from __future__ import annotations

import re
from urllib.parse import quote, unquote, urlsplit, urlunsplit

_URL_PASSWORD = re.compile(r"(\b[a-zA-Z][a-zA-Z0-9+.-]*://[^:/@\s\"]*:)[^@/\s\"]*@")


def split_urls(urls: str) -> list[str]:
    """`nats://a:4222,nats://b:4222` -> each URL of a comma-separated list (a cluster's servers)."""
    return [url.strip() for url in urls.split(",") if url.strip()]


def url_with_credentials(url: str, user: str, password: str) -> str:
    """`url` with `user:password@` (percent-encoded); an equal pair already there is kept, another is an error.
    For a comma-separated list of URLs, each of them."""
    if "," in url:
        return ",".join(url_with_credentials(one, user, password) for one in split_urls(url))
    parts = urlsplit(url)
    if parts.username is not None:
        if (unquote(parts.username), unquote(parts.password or "")) != (user, password):
            raise ValueError(
                "the NATS URL carries other credentials than PODWAY_NATS_USER / PODWAY_NATS_PASSWORD"
            )
        return url
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{parts.netloc}"
    return urlunsplit(parts._replace(netloc=netloc))


def redact_credentials(text: str) -> str:
    """`text` with the password of every `scheme://user:password@` in it replaced by `***`: for logs and output."""
    return _URL_PASSWORD.sub(r"\1***@", text) if "@" in text else text
