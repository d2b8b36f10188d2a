"""The verifiers side of the bridge: run by the Python of the venv verifiers lives in.

verifiers 0.4.0 pins ``openai<3`` and ``mcp==2.0.0``, which cannot sit beside
agentsgym's test pins, so agentsgym talks to it across a process boundary: this
program (``python bridge_program.py SETTINGS_JSON``) imports nothing of agentsgym.

It hosts verifiers' own env server (:class:`verifiers.v1.serve.EnvServer`, over ZMQ,
in this process), or connects to one already running (``address``), and drives it
with verifiers' own :class:`verifiers.v1.serve.EnvClient`. It owns the taskset the
way verifiers' eval does: it loads the tasks client-side and ships each task's data
to the server with a run request.

It speaks JSON lines: one object per line on stdin, one per line on stdout (logs go
to stderr). First it writes ``{"ready": true, ...}`` (or ``{"ready": false,
"error": ...}`` and exits 2). Then, per request:

* ``{"id": N, "op": "tasks", "count": K}`` -> ``{"id": N, "tasks": [task_data, ...]}``
  (each task's dumped ``TaskData``; ``count`` may be null for a finite taskset);
* ``{"id": N, "op": "run", "task_data": {...}, "base_url": URL, "model": M,
  "sampling": {...}}`` -> ``{"id": N, "episode": SUMMARY}``: one rollout through the
  env server, the model reached at ``base_url`` (an OpenAI-compatible endpoint);
* ``{"id": N, "op": "cancel", "target": M}``: abandon run ``M`` (its reply says so).

A failed request is answered ``{"id": N, "error": "..."}``; stdin closing ends the
program.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import traceback
from typing import Any

logger = logging.getLogger("agentsgym_verifiers.bridge_program")

LOCAL_RUNTIME = {"type": "subprocess"}
"""The runtime of a seat whose config names none: a local subprocess. verifiers' own
default is a remote Prime sandbox, which needs an account and the network."""

API_KEY_VARIABLE = "AGENTSGYM_VERIFIERS_MODEL_KEY"
"""The variable verifiers reads the model's API key from. The gateway's session key
travels in the endpoint's path, so the key verifiers sends does not matter."""


def episode_summary(episode: Any) -> dict[str, Any]:
    """What agentsgym keeps of a verifiers episode: its standing, the rubric's named
    rewards and metrics, and the weighted total that is the episode's reward."""
    traces = list(episode.traces)
    several = len(traces) > 1
    rewards: dict[str, dict[str, float] | None] = {}
    metrics: dict[str, float | None] = {}
    info: dict[str, Any] = {}
    for trace in traces:
        prefix = f"{trace.agent.name}/" if several else ""
        for name, reward in trace.rewards.items():
            rewards[prefix + name] = (
                None if reward is None else {"score": reward.score, "weight": reward.weight}
            )
        for name, value in trace.metrics.items():
            metrics[prefix + name] = value
        info.update({prefix + key: value for key, value in trace.info.items()})
    errors = [f"{e.type}: {e.message}" for e in episode.errors]
    for trace in traces:
        errors += [f"{e.type}: {e.message}" for e in trace.errors]
    return {
        "ok": bool(episode.ok) and all(trace.ok for trace in traces),
        "errors": errors,
        "reward": sum(trace.reward for trace in traces),
        "rewards": rewards,
        "metrics": metrics,
        "info": _jsonable(info),
        "stop_conditions": [trace.stop_condition for trace in traces],
        "num_turns": sum(trace.num_turns for trace in traces),
        "num_traces": len(traces),
        "messages": [
            [{"role": n.message.role, "content": n.message.content} for n in trace.nodes]
            for trace in traces
        ],
        "episode_id": episode.id,
    }


def with_local_runtimes(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (verifiers' env config data) with :data:`LOCAL_RUNTIME` for every agent
    seat of the env's config class that names no runtime."""
    from verifiers.v1.configs.agent import AgentConfig
    from verifiers.v1.utils.loaders import env_config_type

    taskset = data.get("taskset") or {}
    config_class = env_config_type(taskset.get("id", ""), data.get("id") or "")
    data = dict(data)
    for name, field in config_class.model_fields.items():
        if isinstance(field.default, AgentConfig):
            seat = dict(data.get(name) or {})
            seat.setdefault("runtime", LOCAL_RUNTIME)
            data[name] = seat
    return data


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


class Bridge:
    """The env server (hosted or reached) and the client that drives it."""

    def __init__(self, settings: dict[str, Any]) -> None:
        from verifiers.v1.utils.loaders import resolve_env_config

        self.settings = settings
        self.config = resolve_env_config(with_local_runtimes(settings["env"]))
        self.server: Any = None
        self.client: Any = None
        self.serving: asyncio.Task[None] | None = None
        self.running: dict[int, asyncio.Task[None]] = {}
        self.out_lock = asyncio.Lock()

    async def start(self) -> dict[str, Any]:
        from verifiers import __version__
        from verifiers.v1.serve import EnvClient, EnvServer

        address = self.settings.get("address")
        if address is None:
            self.server = EnvServer(
                self.config,
                address="tcp://127.0.0.1:0",
                max_concurrent=self.settings.get("max_concurrent"),
            )
            address = self.server.address
            self.serving = asyncio.create_task(self.server.run())
        self.client = EnvClient(address)
        await self.client.wait_for_server_startup(
            timeout=float(self.settings.get("startup_timeout", 120.0))
        )
        return {
            "ready": True,
            "address": address,
            "hosted": self.server is not None,
            "verifiers": __version__,
            "taskset": self.config.taskset.id,
        }

    async def stop(self) -> None:
        for task in self.running.values():
            task.cancel()
        await asyncio.gather(*self.running.values(), return_exceptions=True)
        if self.client is not None:
            await self.client.close()
        if self.serving is not None:
            self.serving.cancel()
            await asyncio.gather(self.serving, return_exceptions=True)

    # ------------------------------------------------------------------ requests
    def tasks(self, count: int | None) -> list[dict[str, Any]]:
        from verifiers.v1.utils.loaders import load_taskset

        taskset = load_taskset(self.config.taskset)
        if count is None:
            if not taskset.bounded:
                raise ValueError(
                    f"taskset {self.config.taskset.id!r} is infinite: say how many tasks "
                    "to take (num_tasks in the env_config)"
                )
        else:
            taskset = taskset.take(count)
        return [task.data.model_dump(mode="json") for task in taskset]

    async def run(self, request: dict[str, Any]) -> dict[str, Any]:
        from verifiers.v1.clients import EvalClientConfig
        from verifiers.v1.types import SamplingConfig

        client = EvalClientConfig(base_url=request["base_url"], api_key_var=API_KEY_VARIABLE)
        sampling = SamplingConfig.model_validate(request.get("sampling") or {})
        episode = await self.client.run(client, request["model"], sampling, request["task_data"])
        return episode_summary(episode)

    async def answer(self, request: dict[str, Any]) -> None:
        ident = request.get("id")
        try:
            op = request.get("op")
            if op == "tasks":
                reply: dict[str, Any] = {
                    "tasks": await asyncio.to_thread(self.tasks, request.get("count"))
                }
            elif op == "run":
                reply = {"episode": await self.run(request)}
            else:
                reply = {"error": f"unknown op {op!r}: expected tasks, run or cancel"}
        except asyncio.CancelledError:
            reply = {"error": "cancelled: the run was abandoned by agentsgym"}
        except Exception as exc:  # noqa: BLE001 - a failed request is an answer
            logger.debug("request %s failed:\n%s", ident, traceback.format_exc())
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            self.running.pop(ident, None)  # type: ignore[arg-type]
        await self.write({"id": ident, **reply})

    async def write(self, message: dict[str, Any]) -> None:
        line = json.dumps(message, default=str) + "\n"
        async with self.out_lock:
            sys.stdout.write(line)
            sys.stdout.flush()

    def dispatch(self, request: dict[str, Any]) -> None:
        if request.get("op") == "cancel":
            task = self.running.get(request.get("target"))  # type: ignore[arg-type]
            if task is not None:
                task.cancel()
            return
        task = asyncio.create_task(self.answer(request))
        self.running[request.get("id")] = task  # type: ignore[index]


async def serve(settings: dict[str, Any]) -> int:
    try:
        bridge = Bridge(settings)
        ready = await bridge.start()
    except Exception as exc:  # noqa: BLE001 - said on stdout, then the exit status
        sys.stdout.write(json.dumps({"ready": False, "error": f"{type(exc).__name__}: {exc}"}))
        sys.stdout.write("\n")
        sys.stdout.flush()
        logger.error("%s", traceback.format_exc())
        return 2
    await bridge.write(ready)
    loop = asyncio.get_running_loop()
    try:
        while True:
            line = await loop.run_in_executor(None, sys.stdin.readline)
            if not line:
                break
            if not line.strip():
                continue
            try:
                request = json.loads(line)
            except json.JSONDecodeError as exc:
                await bridge.write({"id": None, "error": f"request is not JSON: {exc}"})
                continue
            bridge.dispatch(request)
    finally:
        await bridge.stop()
    return 0


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    if len(sys.argv) != 2:
        sys.stderr.write("usage: python bridge_program.py SETTINGS_JSON\n")
        raise SystemExit(2)
    raise SystemExit(asyncio.run(serve(json.loads(sys.argv[1]))))


if __name__ == "__main__":
    main()
