"""Chat through geist's chat layer (geist_chat.h): templates, tools, the output parser.
Runs when the loaded libgeist has the chat layer; the ChatML fallback path is tested by
test_stream.py either way."""

import os

import pytest

import geist
from geist import _core
from conftest import FIXTURES, _missing

if not _core.HAS_CHAT:
    pytest.skip("this libgeist has no chat layer (geist_chat.h not implemented yet)",
                allow_module_level=True)

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]
MESSAGES = [{"role": "system", "content": "You tell stories."},
            {"role": "user", "content": "Tell me about a cat."}]


def template(name):
    p = os.path.join(FIXTURES, "templates", name)
    if not os.path.exists(p):
        _missing(p)
    with open(p, encoding="utf-8") as f:
        return f.read()


def test_fallback_template_renders_the_conversation(llama_path):
    llm = geist.Llama(llama_path)
    tmpl = llm._chat_template()
    assert tmpl.is_fallback  # the fixtures have no chat template: ChatML
    prompt = tmpl.render(MESSAGES)
    assert "Tell me about a cat." in prompt and "You tell stories." in prompt


def test_template_source_and_tools(llama_path):
    llm = geist.Llama(llama_path, chat_template=template("Qwen-Qwen3-0.6B.jinja"))
    tmpl = llm._chat_template()
    assert not tmpl.is_fallback
    prompt = tmpl.render(MESSAGES, tools=TOOLS)
    assert "<|im_start|>user\nTell me about a cat.<|im_end|>" in prompt
    assert "get_weather" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")


def test_chat_stream_equals_whole_with_template(any_model_path):
    llm = geist.Llama(any_model_path, chat_template=template("Qwen-Qwen3-0.6B.jinja"))
    whole = llm.create_chat_completion(MESSAGES, max_tokens=24, seed=3, tools=TOOLS)
    msg = whole["choices"][0]["message"]
    assert msg["role"] == "assistant"
    chunks = list(llm.create_chat_completion(MESSAGES, max_tokens=24, seed=3, tools=TOOLS,
                                             stream=True))
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    reasoning = "".join(c["choices"][0]["delta"].get("reasoning_content") or "" for c in chunks)
    assert text == (msg.get("content") or "")
    assert reasoning == (msg.get("reasoning_content") or "")
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]


def test_bad_template_is_a_format_error(llama_path):
    llm = geist.Llama(llama_path, chat_template="{% if %}")
    with pytest.raises(geist.GeistFormatError):
        llm.create_chat_completion(MESSAGES, max_tokens=2)
