"""stream=True iterators: chunks concatenate to the non-streamed result."""

import pytest

import geist
from conftest import PROMPT


@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_completion_stream_concatenates(any_model_path, temperature):
    llm = geist.Llama(any_model_path)
    whole = llm(PROMPT, max_tokens=40, temperature=temperature, seed=7)
    chunks = list(llm(PROMPT, max_tokens=40, temperature=temperature, seed=7, stream=True))
    assert all(c["object"] == "text_completion" for c in chunks)
    assert "".join(c["choices"][0]["text"] for c in chunks) == whole["choices"][0]["text"]
    assert len(chunks) > 2
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])


def test_chat_stream_concatenates(any_model_path):
    llm = geist.Llama(any_model_path)
    msgs = [{"role": "system", "content": "You tell stories."},
            {"role": "user", "content": "Tell me about a cat."}]
    whole = llm.create_chat_completion(msgs, max_tokens=32, seed=3)
    assert whole["object"] == "chat.completion"
    msg = whole["choices"][0]["message"]
    assert msg["role"] == "assistant"
    chunks = list(llm.create_chat_completion(msgs, max_tokens=32, seed=3, stream=True))
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    assert text == (msg["content"] or "")
    assert chunks[-1]["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]
    assert whole["usage"]["completion_tokens"] > 0


def test_stop_string_cuts_and_is_not_emitted(llama_path):
    llm = geist.Llama(llama_path)
    full = llm(PROMPT, max_tokens=40, temperature=0)["choices"][0]["text"]
    assert "Lily" in full
    cut = llm(PROMPT, max_tokens=40, temperature=0, stop=["Lily"])
    assert cut["choices"][0]["text"] == full[: full.index("Lily")]
    assert cut["choices"][0]["finish_reason"] == "stop"
    streamed = "".join(c["choices"][0]["text"]
                       for c in llm(PROMPT, max_tokens=40, temperature=0, stop="Lily",
                                    stream=True))
    assert streamed == cut["choices"][0]["text"]


def test_echo_and_max_tokens(llama_path):
    llm = geist.Llama(llama_path)
    out = llm(PROMPT, max_tokens=5, temperature=0, echo=True)
    assert out["choices"][0]["text"].startswith(PROMPT)
    assert out["usage"]["completion_tokens"] == 5
    assert out["choices"][0]["finish_reason"] == "length"
