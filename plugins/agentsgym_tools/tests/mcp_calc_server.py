"""A small MCP server for the tests (stdio): add; a tool that refuses with a reason
(ToolError) and one that crashes (any other exception); an account lookup that takes a
hidden seed; a tool that ends the server's process."""

import os

from mcp.server import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("calc")
ACCOUNTS = {3: ["ACC-657", "ACC-658"]}


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def refuse(reason: str) -> str:
    """Always refuses, saying why (the model reads the reason)."""
    raise ToolError(reason)


@server.tool()
def fail(reason: str) -> str:
    """Always crashes (the SDK keeps the reason on the server, and logs a traceback)."""
    raise ValueError(reason)


@server.tool()
def balance(account: str, seed: int) -> str:
    """The balance of one of the customer's accounts (seed: the task, injected)."""
    if account not in ACCOUNTS.get(seed, []):
        raise ToolError(f"no account {account}")
    return "100"


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def die() -> str:
    """Ends the server's process mid-call."""
    os._exit(1)


if __name__ == "__main__":
    server.run()
