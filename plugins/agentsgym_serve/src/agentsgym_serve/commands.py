"""``agentsgym serve ENV_ID``: serve an env over HTTP (docs/serving.md).

AgentGym's protocol (``/create``, ``/reset``, ``/step``, ``/observation``,
``/close``) and agentsgym's ``/agentsgym/v1`` endpoints, for ``agentsgym.make(URL)``
and dataset rows that name the server. Logs are JSON lines on stderr; the address
is printed on stdout once the server accepts connections (``--port 0`` picks a free
port), so a client that reads it may connect at once.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

import typer
from rich.markup import escape

from agentsgym.cli import complete_env_id, console, parse_key_values
from agentsgym.errors import AgentsGymError

LOG_LEVELS = ("debug", "info", "warning", "error")


def serve_command(
    env_id: str = typer.Argument(
        ...,
        help="registered env id (or module:Class with --allow-class-paths)",
        autocompletion=complete_env_id,
    ),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="address to listen on; 0.0.0.0 exposes the env to the network"
    ),
    port: int = typer.Option(8000, "--port", min=0, max=65535, help="port (0: a free one)"),
    max_sessions: int = typer.Option(
        1024, "--max-sessions", min=1, max=10_000_000, help="live sessions at most; past it, 503"
    ),
    env_config: list[str] | None = typer.Option(
        None, "--env-config", help="key=value, repeatable: the served config"
    ),
    idle_timeout: float = typer.Option(
        600.0, "--idle-timeout", min=0.01, metavar="SECONDS", help="close sessions unused this long"
    ),
    max_env_configs: int = typer.Option(
        16, "--max-env-configs", min=1, max=10_000, help="distinct client env_configs held at once"
    ),
    lock_config: bool = typer.Option(
        False, "--lock-config", help="refuse client env_configs that differ from the served one"
    ),
    split: str = typer.Option(
        "train", "--split", help="the dataset split AgentGym's data_idx indexes"
    ),
    threads: int = typer.Option(
        32, "--threads", min=1, max=4096, help="worker threads for env hooks"
    ),
    max_body_bytes: int = typer.Option(
        1 << 20,
        "--max-body-bytes",
        min=1,
        metavar="BYTES",
        help="the largest request body taken (1 MiB); a larger one is answered 413",
    ),
    observation: str = typer.Option(
        "agentsgym",
        "--observation",
        help="the shape of OpenEnv's observations: agentsgym (chat messages, reward terms) "
        "or textarena (OpenEnv's text envs': a transcript in messages[0].content and a "
        "prompt, as TRL's OpenEnv examples read)",
    ),
    agentgym_create: str = typer.Option(
        "object",
        "--agentgym-create",
        help="AgentGym's /create reply: object (an id and an observation: BabyAI's, "
        "TextCraft's, SciWorld's, ALFWorld's, lmrlgym's clients) or integer (the bare id: "
        "WebShop's, SQLGym's, the tool envs' clients)",
    ),
    agentgym_action_format: str | None = typer.Option(
        None,
        "--agentgym-action-format",
        help="put AgentGym actions that are only letters, digits, commas and spaces (what "
        "BabyAI's and TextCraft's clients leave) into this format, e.g. '[{action}]' "
        "(default: the env's agentgym_action_format)",
    ),
    allow_class_paths: bool = typer.Option(
        False, "--allow-class-paths", help="let ENV_ID be a module:Class path (imports code)"
    ),
    agent: list[str] | None = typer.Option(
        None,
        "--agent",
        help="an env with roles: the server's agent of a role clients do not play, "
        "ROLE=NAME (repeatable), or NAME for every such role (default: a role's own "
        "default agent, if it declares one)",
    ),
    agent_option: list[str] | None = typer.Option(
        None,
        "--agent-option",
        help="key=value for the --agent NAME agent, ROLE.key=value for a role's (repeatable)",
    ),
    client_role: str | None = typer.Option(
        None,
        "--client-role",
        help="an env with roles: the role a client plays unless it names one (AgentGym's "
        "clients cannot; default: the env's first trainable role the server can serve)",
    ),
    ws_compression: bool = typer.Option(
        False,
        "--ws-compression",
        help="accept WebSocket clients' permessage-deflate (/ws); off: messages travel "
        "uncompressed, cheaper in CPU on both ends",
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning or error"),
    access_log: bool = typer.Option(
        True, "--access-log/--no-access-log", help="one log line per request"
    ),
) -> None:
    """Serve ENV_ID over HTTP: AgentGym's protocol, agentsgym's /agentsgym/v1 and, with
    openenv-core installed, OpenEnv's (/ws)."""
    if split not in ("train", "eval"):
        raise typer.BadParameter("--split must be train or eval")
    if observation not in ("agentsgym", "textarena"):
        raise typer.BadParameter("--observation must be agentsgym or textarena")
    if agentgym_create not in ("object", "integer"):
        raise typer.BadParameter("--agentgym-create must be object or integer")
    if agentgym_action_format is not None and "{action}" not in agentgym_action_format:
        raise typer.BadParameter("--agentgym-action-format must contain {action}")
    if log_level.lower() not in LOG_LEVELS:
        raise typer.BadParameter(f"--log-level must be one of {', '.join(LOG_LEVELS)}")
    from agentsgym_serve.app import create_app
    from agentsgym_serve.logs import configure_json_logging
    from agentsgym_serve.server import (
        bind_socket,
        freeze_heap,
        run_server,
        url_of,
        uvicorn_server,
    )

    served = parse_key_values(env_config, "--env-config")
    asgi = create_app(
        env_id,
        served,
        max_sessions=max_sessions,
        idle_timeout=idle_timeout,
        max_env_configs=max_env_configs,
        lock_config=lock_config,
        allow_class_paths=True if allow_class_paths else None,
        agentgym_split=split,
        threads=threads,
        max_body_bytes=max_body_bytes,
        observation=observation,
        agentgym_create=agentgym_create,
        agentgym_action_format=agentgym_action_format,
        agents=_agents_by_role(env_id, agent),
        agent_options=parse_key_values(agent_option, "--agent-option"),
        client_role=client_role,
        role_default_agents=True,
    )
    try:
        sock = bind_socket(host, port)
    except OSError as exc:
        raise AgentsGymError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port "
            "(0 picks a free one) or --host"
        ) from None
    level = getattr(logging, log_level.upper())
    configure_json_logging(level, access_log=access_log)
    if not _loopback(host) and not lock_config:
        logging.getLogger("agentsgym_serve").warning(
            "listening beyond this machine without --lock-config: any client can choose the "
            "env_config (see docs/serving.md, security)",
            extra={"fields": {"event": "exposed", "host": host}},
        )
    freeze_heap()
    run_server(
        uvicorn_server(asgi, log_level=log_level.lower(), ws_compression=ws_compression),
        [sock],
        on_started=lambda: _announce(env_id, url_of(sock), asgi),
    )


def _announce(env_id: str, url: str, asgi: Any) -> None:
    """What the server serves, where, and which roles clients play: printed once it
    accepts connections."""
    openenv = ", OpenEnv's at /ws" if getattr(asgi.state, "openenv", None) else ""
    console.print(
        f"serving {escape(env_id)} on {url} (AgentGym's protocol at /, agentsgym's at "
        f"/agentsgym/v1{openenv}, OpenAPI at {url}/docs); Ctrl-C stops",
        highlight=False,
        soft_wrap=True,
    )
    service = asgi.state.service
    if service.role_agents is not None:
        roles = service.role_agents
        default = roles.default_role(service.host.default.env)
        agents = ", ".join(f"{role}={agent.label}" for role, agent in roles.agents.items())
        console.print(
            escape(
                f"clients play {' or '.join(roles.client_roles)} (by default {default}); "
                f"the server's agents play the other roles: {agents}"
            ),
            highlight=False,
            soft_wrap=True,
        )


def _agents_by_role(env_id: str, values: list[str] | None) -> dict[str | None, str]:
    """``--agent`` values as the server's agents by role (``None``: every role a client
    does not play), read as ``agentsgym rollout`` reads them."""
    from agentsgym.cli import AgentChoices

    choices = AgentChoices.parse(values)
    other = sorted(set(choices.per_env) - {env_id})
    if other:
        raise typer.BadParameter(
            f"--agent {other[0]}=...: this server serves {env_id} only; give --agent "
            "ROLE=NAME or --agent NAME"
        )
    default = choices.per_env.get(env_id, choices.default)
    agents: dict[str | None, str] = dict(choices.per_role)
    if default is not None:
        agents[None] = default
    return agents


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
