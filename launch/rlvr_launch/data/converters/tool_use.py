"""Function calling (Salesforce/xlam-function-calling-60k schema) -> the `tool_call` verifier.

Source schema: `query` (str), `tools` (JSON string: [{"name", "description", "parameters":
{param: {"type": "str" | "int" | "float" | "bool" | "List[int]" | "str, optional" | ..., "description",
"default"?}}}]), `answers` (JSON string: [{"name", "arguments": {...}}]). OpenAI-style tools
({"type": "function", "function": {...}} with a JSON-schema `parameters`) are accepted as they are.

xlam's `parameters` is not a JSON schema; it is converted to one: `str`->string, `int`->integer,
`float`->number, `bool`->boolean, `List[...]`/`list`->array, `Dict[...]`/`dict`->object (other types:
no type constraint), described parameters without ", optional" and without a default are required.
The reference answer must itself validate against the converted schema (checked here with jsonschema,
as the verifier will) or the row is dropped: a ground truth the verifier would reject cannot pay.
Ground truth: {"tools": [OpenAI-style tools], "expected": [calls]}.
Dropped: empty_question, tools_not_json, answers_not_json, no_tools, answer_calls_unknown_tool,
reference_call_fails_tool_schema.
"""

from __future__ import annotations

import json
import re

import jsonschema

from rlvr_launch.data.converters import Drop, text_field, verl_row

NAME = "tool_use"
VERIFIER = "tool_call"
HUB_ID = "Salesforce/xlam-function-calling-60k"
HUB_CONFIG = None
SPLITS = {"train": "train", "test": None}
SCHEMA = "query, tools (JSON), answers (JSON)"

SYSTEM = (
    "You can call the functions described in <tools></tools>. For each call, return a JSON object with the "
    'function name and its arguments inside <tool_call></tool_call> tags: <tool_call>{{"name": ..., '
    '"arguments": {{...}}}}</tool_call>. Make every call the request needs and nothing else.\n<tools>\n{tools}\n</tools>'
)
_TYPES = {
    "str": "string",
    "string": "string",
    "int": "integer",
    "integer": "integer",
    "float": "number",
    "number": "number",
    "bool": "boolean",
    "boolean": "boolean",
    "list": "array",
    "tuple": "array",
    "dict": "object",
    "object": "object",
}


def _json_type(type_text: str) -> str | None:
    base = re.split(r"[\[,\s]", type_text.strip().lower(), maxsplit=1)[0]
    return _TYPES.get(base)


def _schema(parameters: dict) -> dict:
    if parameters.get("type") == "object" and isinstance(parameters.get("properties"), dict):
        return parameters  # already a JSON schema
    properties, required = {}, []
    for name, spec in parameters.items():
        spec = spec if isinstance(spec, dict) else {}
        type_text = str(spec.get("type", ""))
        prop = {"description": str(spec.get("description", ""))}
        json_type = _json_type(type_text)
        if json_type:
            prop["type"] = json_type
        properties[name] = prop
        if "optional" not in type_text.lower() and "default" not in spec:
            required.append(name)
    schema = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return schema


def openai_tools(tools: list) -> list[dict]:
    out = []
    for tool in tools:
        if not isinstance(tool, dict):
            raise Drop("tools_not_json")
        fn = tool.get("function") if tool.get("type") == "function" else tool
        if not isinstance(fn, dict) or not fn.get("name"):
            raise Drop("tools_not_json")
        params = fn.get("parameters") or {}
        if not isinstance(params, dict):
            raise Drop("tools_not_json")
        out.append(
            {
                "type": "function",
                "function": {
                    "name": str(fn["name"]),
                    "description": str(fn.get("description", "")),
                    "parameters": _schema(params),
                },
            }
        )
    return out


def _load(value, reason: str):
    if isinstance(value, list | dict):
        return value
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        raise Drop(reason) from None


def convert(row: dict, split: str, index: int) -> dict:
    query = text_field(row, "query", "question")
    if not query:
        raise Drop("empty_question")
    tools = _load(row.get("tools"), "tools_not_json")
    if not isinstance(tools, list) or not tools:
        raise Drop("no_tools")
    tools = openai_tools(tools)
    answers = _load(row.get("answers"), "answers_not_json")
    if isinstance(answers, dict):
        answers = [answers]
    if not isinstance(answers, list) or not all(isinstance(a, dict) and a.get("name") for a in answers):
        raise Drop("answers_not_json")
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    expected = []
    for call in answers:
        arguments = call.get("arguments", {})
        if isinstance(arguments, str):
            arguments = _load(arguments, "answers_not_json")
        if call["name"] not in by_name:
            raise Drop("answer_calls_unknown_tool", call["name"])
        try:
            jsonschema.validate(arguments, by_name[call["name"]])
        except jsonschema.ValidationError as e:
            raise Drop("reference_call_fails_tool_schema", e.message) from None
        expected.append({"name": call["name"], "arguments": arguments})
    tools_text = "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
    return verl_row(
        data_source=NAME,
        prompt=[
            {"role": "system", "content": SYSTEM.format(tools=tools_text)},
            {"role": "user", "content": query},
        ],
        ability="tool_use",
        ground_truth={"tools": tools, "expected": expected},
        split=split,
        index=index,
        verifier=VERIFIER,
        extra={"num_calls": str(len(expected))}
        | ({"id": str(row["id"])} if row.get("id") is not None else {}),
    )
