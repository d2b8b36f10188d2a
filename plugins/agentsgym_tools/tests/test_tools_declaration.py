"""Tools are declared as plain functions (schemas the way transformers derives them) or
as explicit schemas; what cannot be a tool says why when the env is built."""

from __future__ import annotations

import pytest

from agentsgym_tools import ToolDeclarationError, ToolEnv, as_tools, tool
from agentsgym_tools.tool import FUNCTION_FIELDS


def forecast(city: str, days: int = 1) -> str:
    """Tell the weather.

    Args:
        city: where
        days: how many days ahead
    """
    return f"sunny in {city} for {days} days"


def test_a_function_becomes_a_tool_with_transformers_schema() -> None:
    from transformers.utils import get_json_schema

    made = tool(forecast)
    assert made.name == "forecast" and made.function is forecast
    derived = get_json_schema(forecast)
    assert made.schema["function"] == {
        k: v for k, v in derived["function"].items() if k in FUNCTION_FIELDS
    }
    assert made.parameters["required"] == ["city"]
    assert made.parameters["properties"]["days"]["type"] == "integer"


def test_a_schema_keeps_what_an_openai_compatible_server_keeps() -> None:
    """vLLM keeps name, description, parameters and strict of a request's tool and
    renders those: get_json_schema's return type, or any other key, would render into a
    token-in prompt what a chat-mode server never shows the model."""
    from transformers.utils import get_json_schema

    assert "return" in get_json_schema(forecast)["function"]
    assert set(tool(forecast).schema["function"]) == {"name", "description", "parameters"}
    explicit = {
        "name": "ping",
        "parameters": {"type": "object", "properties": {}},
        "strict": True,
        "return": {"type": "string"},
        "x-owner": "ops",
    }
    assert tool(schema=explicit).schema["function"] == {
        "name": "ping",
        "parameters": {"type": "object", "properties": {}},
        "strict": True,
    }


def test_explicit_schemas_are_accepted_in_both_forms() -> None:
    bare = {
        "name": "ping",
        "description": "Ping.",
        "parameters": {"type": "object", "properties": {}},
    }
    wrapped = {"type": "function", "function": bare}
    for schema in (bare, wrapped):
        made = tool(schema=schema)
        assert made.name == "ping" and made.function is None
        assert made.schema == wrapped
    renamed = tool(forecast, name="weather")
    assert renamed.name == "weather" and renamed.schema["function"]["name"] == "weather"


def test_what_cannot_be_a_tool_says_what_to_do() -> None:
    def undocumented(x):  # type: ignore[no-untyped-def]
        return x

    with pytest.raises(ToolDeclarationError, match="type hint"):
        tool(undocumented)
    with pytest.raises(ToolDeclarationError, match="names must differ"):
        as_tools([forecast, tool(forecast)])
    with pytest.raises(ToolDeclarationError, match="'type': 'function'"):
        tool(schema={"type": "retrieval"})
    with pytest.raises(ToolDeclarationError, match="a function, a Tool or a JSON schema"):
        as_tools([42])


def test_a_tool_env_with_a_bad_tool_fails_when_built() -> None:
    def bad(x):  # type: ignore[no-untyped-def]
        return x

    class BadEnv(ToolEnv):
        tools = (bad,)

    with pytest.raises(ToolDeclarationError, match="bad"):
        BadEnv()
    assert as_tools([forecast]) == [tool(forecast)]
