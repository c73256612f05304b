"""`ApiServerService`: the Kubernetes REST API over HTTPS, an adapter over admission's requests and the change
feed. Discovery and OpenAPI come from libs.kubeapi; every rule is admission's."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from libs.kubeapi import discovery, openapi, status
from libs.kubeapi.security import (
    ADMIN,
    Tokens,
    User,
    authorize,
    ensure_ca_and_server_cert,
    generate_default_tokens,
    server_ssl_context,
    write_kubeconfig,
)
from libs.messaging.broker import bus_state, make_broker, start_broker
from libs.messaging.errors import RpcError, RpcTimeout, RpcUnavailable
from libs.messaging.readiness import connection_states
from libs.runtime.health import BEAT_DETAIL, beat_forever, health_file
from libs.runtime.metrics import LIST_STORES
from libs.runtime.shutdown import bounded, cancel_tasks
from services.api_server.answers import USER, Refused, answer, refusal
from services.api_server.backend import Admission
from services.api_server.feed import ChangeFeed
from services.api_server.listed import ListedObjects
from services.api_server.routes import GroupVersionPath, Target, UnknownPath, parse
from services.api_server.settings import ApiServerSettings
from services.api_server.writes import Verbs

log = logging.getLogger(__name__)

SERVICE = "api_server"
OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"

MAX_HEADER_BYTES = 1 << 20
"""Go's `http.DefaultMaxHeaderBytes`: a long label selector in the URL is served, as by kube-apiserver."""

Handler = Callable[[web.Request, Target], Awaitable[web.StreamResponse]]


FILL_LISTS_S = 30.0
"""How long a start may spend decoding pods for lists before the API listens anyway."""


class ApiServerService:
    """Serves until stopped; writes `DATA_DIR/kubeconfig` for the admin token once it listens."""

    def __init__(self, settings: ApiServerSettings) -> None:
        if not settings.nats_url:
            raise ValueError("the API server needs PODWAY_NATS_URL")
        self.settings = settings
        self.broker = make_broker(settings.nats_url, f"api_server-{settings.instance}")
        self.admission = Admission(self.broker)
        self.feed = ChangeFeed(self.admission)
        self.verbs = Verbs(self.admission, self.feed, listed=ListedObjects(kept=settings.api_listed_objects))
        LIST_STORES.track(SERVICE, self.verbs.listed)
        self.tokens: Tokens | None = None
        self.runner: web.AppRunner | None = None
        self.url = ""
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        await start_broker(self.broker)
        await self.feed.start()
        secrets_dir = self.settings.data_dir / "pki"
        secrets_dir.mkdir(parents=True, exist_ok=True)
        tokens_file = self.settings.api_tokens_file or generate_default_tokens(secrets_dir)
        self.tokens = Tokens.load(tokens_file)
        context = None
        if self.settings.api_tls:
            context = server_ssl_context(ensure_ca_and_server_cert(secrets_dir))
        await self._fill_lists()
        await self._listen(context)
        self._write_kubeconfig(secrets_dir)
        if self.settings.data_dir:
            beacon = health_file(Path(self.settings.run_dir), SERVICE)
            BEAT_DETAIL["url"] = self.url
            self._tasks.append(
                asyncio.create_task(
                    beat_forever(beacon, alive=self.connected, connections=connection_states(self.broker)),
                    name="health",
                )
            )
        log.info("API server ready", extra={"url": self.url})

    async def _fill_lists(self) -> None:
        """Pods decoded for lists before the API listens (see Reads.fill_lists), so that the first list after
        a start is not the one that decodes them all; without admission (or past FILL_LISTS_S) it listens
        at once and lists decode what they read, as they would anyway."""
        started = asyncio.get_running_loop().time()
        try:
            filled = await asyncio.wait_for(self.verbs.fill_lists("Pod"), FILL_LISTS_S)
        except (RpcError, TimeoutError) as error:
            log.info("lists start unfilled: %s", error or type(error).__name__)
            return
        seconds = round(asyncio.get_running_loop().time() - started, 3)
        log.info("list store filled", extra={"objects": filled, "seconds": seconds})

    async def _listen(self, context: ssl.SSLContext | None) -> None:
        app = web.Application(client_max_size=8 * 1024 * 1024, middlewares=[self._guard])
        app.router.add_route("*", "/{tail:.*}", self.dispatch)
        self.runner = web.AppRunner(
            app,
            access_log=None,
            handler_cancellation=True,
            max_line_size=MAX_HEADER_BYTES,
            max_field_size=MAX_HEADER_BYTES,
        )
        await self.runner.setup()
        host, port = self.settings.api_host, self._port()
        site = web.TCPSite(self.runner, host, port, ssl_context=context, reuse_address=True)
        await site.start()
        sock: socket.socket = site._server.sockets[0]  # type: ignore[union-attr]
        bound = sock.getsockname()[1]
        scheme = "https" if context else "http"
        self.url = f"{scheme}://{host}:{bound}"
        self._port_file().write_text(str(bound))

    def _port_file(self) -> Path:
        return self.settings.data_dir / "pki" / "api-port"

    def _port(self) -> int:
        """The port asked for; else the one used before (a kubeconfig handed out stays valid); else 6443
        when free; else any."""
        if self.settings.api_port is not None:
            return self.settings.api_port
        try:
            return int(self._port_file().read_text())
        except (OSError, ValueError):
            pass
        with socket.socket() as probe:
            try:
                probe.bind((self.settings.api_host, 6443))
            except OSError:
                return 0
        return 6443

    def _write_kubeconfig(self, secrets_dir: Path) -> None:
        assert self.tokens is not None
        token = self.tokens.token_of(ADMIN.name)
        user = ADMIN.name
        if token is None and (writer := self.tokens.first_writer()) is not None:
            token, user = writer[0], writer[1].name  # a tokens file of the operator's, without Podway's admin
        if token is None:
            return
        ca = secrets_dir / "ca.crt" if self.settings.api_tls else None
        write_kubeconfig(self.settings.data_dir / "kubeconfig", self.url, ca, token, user=user)

    async def stop(self) -> None:
        await cancel_tasks(self._tasks, service=SERVICE)
        await self.feed.stop()
        self.verbs.read_ahead.close()
        if self.runner is not None:
            await bounded(self.runner.cleanup(), "closing the HTTP server", service=SERVICE)
        await bounded(self.broker.stop(), "stopping the broker", service=SERVICE)

    def connected(self) -> bool:
        return bus_state(self.broker) != "closed"

    # --- HTTP ------------------------------------------------------------------------------------

    @web.middleware
    async def _guard(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Authentication, then errors as `Status` objects: nothing escapes as a bare 500."""
        assert self.tokens is not None
        user = self.tokens.authenticate(request.headers.get("Authorization"))
        if user is None:
            return refusal(status.unauthorized())
        request[USER] = user
        try:
            return await handler(request)
        except Refused as refused:
            return refusal(refused.answer)
        except RpcUnavailable as error:
            return refusal(status.failure(503, "ServiceUnavailable", f"admission is unavailable: {error}"))
        except RpcTimeout:
            return refusal(
                status.failure(
                    504, "Timeout", "the server was unable to return a response in the time allotted"
                )
            )
        except RpcError as error:
            return refusal(_rpc_refusal(error))
        except web.HTTPException:
            raise
        except ConnectionResetError:
            raise
        except Exception as error:
            log.exception("request failed", extra={"path": request.path})
            return refusal(status.internal_error(f"{type(error).__name__}: {error}"))

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        document = self._document(request, path)
        if document is not None:
            return document
        try:
            target = parse(path)
        except UnknownPath:
            return refusal(
                status.failure(404, "NotFound", "the server could not find the requested resource")
            )
        if isinstance(target, GroupVersionPath):
            found = discovery.api_resource_list(target.group, target.version)
            if found is None:
                return refusal(
                    status.failure(404, "NotFound", "the server could not find the requested resource")
                )
            return answer(found)
        verb, handler = self._verb(request, target)
        self._authorize(request[USER], verb, target)
        return await handler(request, target)

    def _verb(self, request: web.Request, target: Target) -> tuple[str, Handler]:
        method, resource = request.method, target.resource
        if target.name is None:
            table: dict[str, tuple[str, Handler]] = {
                "GET": ("list", self.verbs.list_objects),
                "POST": ("create", self.verbs.create),
                "DELETE": ("deletecollection", self.verbs.delete_collection),
            }
        elif target.subresource is None:
            table = {
                "GET": ("get", self.verbs.get),
                "PUT": ("update", self.verbs.update),
                "PATCH": ("patch", self.verbs.patch),
                "DELETE": ("delete", self.verbs.delete),
            }
        elif target.subresource == "status":
            table = {"GET": ("get", self.verbs.get)}
        elif target.subresource == "eviction":
            table = {"POST": ("create", self.verbs.evict)}
        elif target.subresource == "log":
            table = {"GET": ("get", self.verbs.log)}
        else:
            table = {}
        allowed = method in table and (target.subresource is not None or table[method][0] in resource.verbs)
        if not allowed:
            action = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
            raise Refused(
                status.method_not_allowed(resource.plural, resource.group, action.get(method, method.lower()))
            )
        if table[method][0] == "list" and _watching(request):
            return "watch", table[method][1]
        return table[method]

    @staticmethod
    def _authorize(user: User, verb: str, target: Target) -> None:
        # Anyone authenticated may ask who they are, as upstream's default RBAC allows.
        if target.resource.kind != "SelfSubjectReview" and not authorize(user, verb):
            resource = target.resource
            # A request on one namespace is in that namespace, as upstream's RequestInfo reads its path.
            namespace = target.name if resource.kind == "Namespace" else target.namespace
            raise Refused(
                status.forbidden(
                    user.name,
                    verb,
                    resource.plural,
                    resource.group,
                    namespace or "",
                    target.name or "",
                    target.subresource or "",
                )
            )

    def _document(self, request: web.Request, path: str) -> web.StreamResponse | None:
        """Discovery and OpenAPI documents, or None when the path is not one."""
        if request.method != "GET":
            return None
        if path == "/version":
            return answer(discovery.version_info())
        if path in ("/api", "/apis"):
            media = discovery.negotiate_discovery(request.headers.get("Accept"))
            core = path == "/api"
            if media is not None:
                return _raw(discovery.aggregated_discovery(core, media), media)
            return answer(discovery.api_versions(request.host) if core else discovery.api_group_list())
        if path.startswith("/apis/") and path.count("/") == 2:
            named = discovery.api_group(path.split("/")[2])
            return answer(named) if named else None
        if path == "/openapi/v2":
            if (request.headers.get("Accept") or "").startswith(OPENAPI_V2_PROTOBUF):
                return refusal(status.not_acceptable(["application/json"]))
            return answer(openapi.openapi_v2())
        if path == "/openapi/v3":
            return answer(openapi.openapi_v3_index())
        if path.startswith("/openapi/v3/"):
            parts = path.split("/")[3:]
            group, version = (
                ("", parts[1])
                if parts[0] == "api" and len(parts) == 2
                else ((parts[1], parts[2]) if len(parts) == 3 else ("?", "?"))
            )
            found = openapi.openapi_v3_document(group, version)
            if found is None:
                return refusal(
                    status.failure(404, "NotFound", "the server could not find the requested resource")
                )
            return answer(found)
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        return None


def _rpc_refusal(error: RpcError) -> dict[str, Any]:
    """Admission's error answer as the API server's: what is too large for the bus is too large a request;
    a manifest over admission's limits a bad one."""
    if error.error_type in ("AnswerTooLarge", "RequestTooLarge"):
        return status.request_entity_too_large(error.message)
    if error.error_type == "LimitExceeded":
        if error.message.startswith("Request entity too large"):
            return status.failure(413, "RequestEntityTooLarge", error.message)
        return status.bad_request(error.message)
    return status.internal_error(str(error))


def _watching(request: web.Request) -> bool:
    return (request.query.get("watch") or "").lower() in ("true", "1")


def _raw(document: dict[str, Any], media: str) -> web.Response:
    return web.Response(body=orjson.dumps(document), headers={"Content-Type": media})
