"""ModelGateway: the token-exact gateway between agent programs and a model backend.

::

    from agentsgym_gateway import ModelGateway

    with ModelGateway("http://127.0.0.1:8000/v1") as gateway:
        session = gateway.open_session()
        # the program runs with OPENAI_BASE_URL=session.base_url,
        # OPENAI_API_KEY=session.api_key
        calls = gateway.close_session(session)   # its CallRecords, in order

It listens on 127.0.0.1 unless given another host.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from agentsgym import EpisodeContext
from agentsgym_gateway.app import GatewayApp
from agentsgym_gateway.backend import Backend
from agentsgym_gateway.limits import DEFAULT_MAX_BODY_BYTES
from agentsgym_gateway.records import CallRecord
from agentsgym_gateway.server import BackgroundServer
from agentsgym_gateway.sessions import GatewaySession, SessionStore
from agentsgym_gateway.tool_parsing import resolve_tool_parser

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SessionHandle:
    """What one program needs: its base URL and key (``repr`` hides the key)."""

    session_id: str
    base_url: str
    api_key: str = field(repr=False)
    prefixed_base_url: str = field(repr=False)
    """The same session as a path prefix, for programs that cannot set a key."""

    def environment(self) -> dict[str, str]:
        """``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` for the program's process."""
        return {"OPENAI_BASE_URL": self.base_url, "OPENAI_API_KEY": self.api_key}


class ModelGateway:
    """See the module docstring.

    :param backend_url: the backend's OpenAI base URL (``http://host:port/v1``).
    :param backend: instead of a URL, a backend object (an
        :class:`~agentsgym_gateway.agent_backend.AgentBackend`: a run's in-process agent):
        ``await get(path)``, ``await post(path, body, context)`` (``context``: the
        calling session's episode, or ``None``) and ``await aclose()``; the first two
        answer with a :class:`~agentsgym_gateway.backend.BackendAnswer`.
    :param backend_api_key: the backend's key, if it needs one (never recorded or logged).
    :param tool_parser: ``"hermes"`` or ``"llama3_json"`` to read tool calls out of a
        text-only backend's replies, as vLLM's parser of that name does; ``"auto"`` for
        the parser of the format ``chat_template`` writes; ``None`` passes replies as
        they are (:mod:`agentsgym_gateway.tool_parsing`).
    :param chat_template: the model's chat template, for ``tool_parser="auto"`` (default:
        an agent backend's own).
    :param max_body_bytes: the largest request body accepted (HTTP 413 above it).
    """

    def __init__(
        self,
        backend_url: str | None = None,
        *,
        backend: Any = None,
        backend_api_key: str | None = None,
        tool_parser: str | None = None,
        chat_template: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        if (backend_url is None) == (backend is None):
            raise ValueError("give the gateway a backend_url or a backend object (one of them)")
        if chat_template is None:
            chat = getattr(backend, "chat", None)
            chat_template = getattr(getattr(chat, "tokenizer", None), "chat_template", None)
        tool_parser = resolve_tool_parser(tool_parser, chat_template)
        if backend is None:
            backend = Backend(str(backend_url), backend_api_key)
        self.store = SessionStore()
        self.gateway_app = GatewayApp(self.store, backend, max_body_bytes, tool_parser)
        self.app = self.gateway_app.build()
        self._server = BackgroundServer(self.app, host, port)

    @property
    def url(self) -> str:
        return self._server.url

    def start(self) -> ModelGateway:
        self._server.start()
        logger.info("model gateway on %s", self.url)
        return self

    def stop(self) -> None:
        self._server.stop()

    def __enter__(self) -> ModelGateway:  # noqa: PYI034 - a plain class, not subclassed
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def open_session(
        self, session_id: str | None = None, context: EpisodeContext | None = None
    ) -> SessionHandle:
        """A session for one program (``context``: the episode it plays, which an agent
        backend hands its agent with each call)."""
        session, key = self.store.open(session_id, context)
        return SessionHandle(session.session_id, f"{self.url}/v1", key, f"{self.url}/s/{key}/v1")

    def session(self, handle: SessionHandle) -> GatewaySession | None:
        return self.store.find(handle.api_key)

    def close_session(self, handle: SessionHandle) -> list[CallRecord]:
        """Stop the session's calls and return its records: exactly the calls its program
        was answered. Later calls get HTTP 401; a call in flight at the close gets HTTP
        410 (or, streaming, an error event in place of its end) and is not recorded."""
        calls = self.store.close(handle.api_key)
        return [] if calls is None else calls
