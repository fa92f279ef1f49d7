"""Llama: the llama-cpp-python shaped front end over one Model and one Session.

Completions and chat completions are OpenAI-shaped dicts (or iterators of chunks with
stream=True). Sampling is reproducible: each call without `seed` takes the next seed of the
object's own RNG (seeded by `seed=`), whose state is part of save_state(), so
save -> draw -> load -> draw gives the same draw again.
"""

from __future__ import annotations

import codecs
import dataclasses
import json
import os
import random
import time
import uuid
from typing import Iterator

from . import _core
from ._core import _LIB, HAS_CHAT, Model, Session, _check, _text_bytes
from ._errors import GeistError, GeistUnsupported
from ._lifetime import Closeable, Closing
from .cache import PrefixCache

import ctypes
from ctypes import byref, c_char_p, c_int, c_size_t, c_void_p


@dataclasses.dataclass
class LlamaState:
    """What Llama.save_state() returns: picklable, restores with Llama.load_state()."""

    image: bytes          # the session snapshot (docs/SNAPSHOT_FORMAT.md)
    n_tokens: int         # tokens in the session's history
    rng_state: object     # the per-call seed generator's state
    seed: int             # the seed the Llama was created with

    # llama-cpp-python's names for the same things
    @property
    def llama_state(self) -> bytes:
        return self.image

    @property
    def llama_state_size(self) -> int:
        return len(self.image)


class _StopMatcher:
    """Cuts text at the first stop string, holding back text that may begin one."""

    def __init__(self, stops):
        self.stops = [s for s in stops if s]
        self.buf = ""

    def feed(self, text: str) -> tuple[str, bool]:
        self.buf += text
        hits = [i for i in (self.buf.find(s) for s in self.stops) if i >= 0]
        if hits:
            out, self.buf = self.buf[: min(hits)], ""
            return out, True
        hold = 0
        for s in self.stops:
            for k in range(min(len(s) - 1, len(self.buf)), 0, -1):
                if self.buf.endswith(s[:k]):
                    hold = max(hold, k)
                    break
        out = self.buf[: len(self.buf) - hold]
        self.buf = self.buf[len(out):]
        return out, False

    def finish(self) -> str:
        out, self.buf = self.buf, ""
        return out


def _stops(stop) -> list[str]:
    if stop is None:
        return []
    if isinstance(stop, str):
        return [stop]
    if not all(isinstance(s, str) for s in stop):
        raise TypeError("stop must be a string or a list of strings")
    return list(stop)


class _ChatTemplate(Closeable):
    """A geist_chat_template (geist_chat.h), or the ChatML fallback in Python when the loaded
    library has no chat layer."""

    def __init__(self, model: Model, source: str | None):
        self.handle = None
        self.is_fallback = False
        if not HAS_CHAT:
            if source is not None:
                raise GeistUnsupported("this libgeist has no chat layer: chat_template cannot "
                                       "be rendered")
            self.is_fallback = True
            return
        out = c_void_p()
        err = ctypes.create_string_buffer(1024)
        fb = c_int(0)

        def make(h):
            if source is None:
                return _LIB.geist_chat_template_from_model(h, None, byref(out), byref(fb), err,
                                                           len(err))
            src = _text_bytes(source, "chat_template")
            return _LIB.geist_chat_template_create_for_model(h, src, len(src), byref(out), err,
                                                             len(err))

        _check(model._call(make), lambda: err.value)
        self.handle = out.value
        self.is_fallback = bool(fb.value)

    def close(self):
        h, self.handle = self.handle, None
        if h is not None:
            _LIB.geist_chat_template_free(h)

    def render(self, messages, tools=None, add_generation_prompt=True, kwargs=None) -> str:
        if self.handle is None:
            return _render_chatml(messages, add_generation_prompt)
        req = {"messages": messages, "add_generation_prompt": bool(add_generation_prompt)}
        if tools:
            req["tools"] = tools
        if kwargs:
            req["chat_template_kwargs"] = kwargs
        data = json.dumps(req).encode()
        st, out = _core._read_buffer(
            lambda buf, cap, n: _LIB.geist_chat_render(self.handle, data, len(data), buf, cap, n))
        _check(st, lambda: _LIB.geist_chat_template_last_error(self.handle))
        return out.decode("utf-8", "replace")


def _render_chatml(messages, add_generation_prompt: bool) -> str:
    parts = []
    for m in messages:
        if not isinstance(m, dict) or "role" not in m:
            raise TypeError("each message must be a dict with a 'role'")
        content = m.get("content") or ""
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        role = "system" if m["role"] == "developer" else m["role"]
        parts.append(f"<|im_start|>{role}\n{content}<|im_end|>\n")
    if add_generation_prompt:
        parts.append("<|im_start|>assistant\n")
    return "".join(parts)


class _OutputParser(Closeable):
    """Generated text -> OpenAI deltas: geist_chat_parser when the library has it, else stop
    strings only (content)."""

    def __init__(self, tmpl: _ChatTemplate | None, prompt: str, stops, tools):
        self.handle = None
        self.matcher = None
        if not HAS_CHAT:
            self.matcher = _StopMatcher(stops)
            return
        opts = {"stop": stops}
        if tools:
            opts["tools"] = tools
        o = json.dumps(opts).encode()
        p = prompt.encode()
        out = c_void_p()
        err = ctypes.create_string_buffer(1024)
        th = tmpl.handle if tmpl is not None else None
        _check(_LIB.geist_chat_parser_create(th, p, len(p), o, len(o), byref(out), err, len(err)),
               lambda: err.value)
        self.handle = out.value

    def feed(self, text: str) -> tuple[list, bool]:
        if self.matcher is not None:
            out, stopped = self.matcher.feed(text)
            return ([{"content": out}] if out else []), stopped
        data = text.encode()
        js = c_char_p()
        stopped = c_int(0)
        _check(_LIB.geist_chat_parser_feed(self.handle, data, len(data), byref(js), byref(stopped)),
               "chat parser failed")
        return json.loads(js.value or b"[]"), bool(stopped.value)

    def finish(self) -> tuple[list, dict | None]:
        if self.matcher is not None:
            out = self.matcher.finish()
            return ([{"content": out}] if out else []), None
        d = c_char_p()
        m = c_char_p()
        _check(_LIB.geist_chat_parser_finish(self.handle, byref(d), byref(m)), "chat parser failed")
        return json.loads(d.value or b"[]"), json.loads(m.value) if m.value else None

    def close(self):
        h, self.handle = self.handle, None
        if h is not None:
            _LIB.geist_chat_parser_free(h)


class Llama(Closing):
    """A model and one session, llama-cpp-python style.

    model_path: GGUF file. n_ctx: context in tokens (0: min(training context, 4096)).
    n_threads: compute threads (None: all cores). seed: seeds the per-call seeds (-1: random).
    kv_mode: "f32", "f16", "q8", "q4", "kivi4", "kivi2". backend: "auto", "cpu", "cuda".
    chat_template: Jinja source overriding the model's (None: the model's, or ChatML).
    verbose: library log lines to stderr."""

    def __init__(self, model_path: str, n_ctx: int = 512, n_threads: int | None = None,
                 seed: int = 0, kv_mode="f16", backend="auto", chat_template: str | None = None,
                 verbose: bool = False, **kwargs):
        if kwargs:
            unknown = ", ".join(sorted(kwargs))
            raise TypeError(f"unknown Llama argument(s): {unknown}")
        self.model_path = os.fspath(model_path)
        self.verbose = verbose
        self._model = Model(self.model_path, backend=backend, verbose=verbose)
        self._session = Session(self._model, n_ctx=n_ctx, n_threads=n_threads or 0,
                                kv_mode=kv_mode, temperature=0.0)
        self.seed = int(random.SystemRandom().getrandbits(63)) if seed is None or seed < 0 else int(seed)
        self._rng = random.Random(self.seed)
        self._sampler_key = None
        self._chat_source = chat_template
        self._chat = None
        self.cache: PrefixCache | None = None

    # -- plumbing --
    @property
    def model(self) -> Model:
        return self._model

    @property
    def session(self) -> Session:
        return self._session

    def n_ctx(self) -> int:
        return self._session.n_ctx

    def n_vocab(self) -> int:
        return self._model.n_vocab

    def token_bos(self) -> int:
        return self._model.token_bos

    def token_eos(self) -> int:
        return self._model.token_eos

    @property
    def n_tokens(self) -> int:
        return self._session.position

    @property
    def input_ids(self) -> list[int]:
        return self._session.tokens

    def close(self) -> None:
        if self._chat is not None:
            self._chat.close()
        self._model.close()

    # -- tokens --
    def tokenize(self, text, add_bos: bool = True, special: bool = False) -> list[int]:
        return self._model.tokenize(text, add_special=add_bos, parse_special=special)

    def detokenize(self, tokens) -> bytes:
        return self._model.detokenize(tokens)

    # -- low level --
    def _set_sampler(self, temperature, top_k, top_p, min_p, repeat_penalty, presence_penalty,
                     penalty_last_n, seed, frequency_penalty=0.0):
        """Sets the sampler unless it already has these settings (then its RNG keeps running);
        an explicit seed always re-seeds, else the next per-call seed is drawn."""
        key = (temperature, top_k, top_p, min_p, repeat_penalty, presence_penalty, penalty_last_n,
               frequency_penalty)
        if key == self._sampler_key and seed is None:
            return
        self._session.set_sampler(
            temperature=temperature, top_k=top_k, top_p=top_p, min_p=min_p,
            repeat_penalty=repeat_penalty, presence_penalty=presence_penalty,
            penalty_last_n=penalty_last_n, frequency_penalty=frequency_penalty,
            seed=self._rng.getrandbits(64) if seed is None else seed)
        self._sampler_key = key

    def reset(self) -> None:
        self._session.reset()
        self._sampler_key = None

    def eval(self, tokens) -> None:
        """Appends tokens to the session and runs them through the model."""
        self._session.prefill(tokens)

    def sample(self, top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05,
               temp: float = 0.80, repeat_penalty: float = 1.0, presence_penalty: float = 0.0,
               penalty_last_n: int = 64, seed: int | None = None,
               frequency_penalty: float = 0.0) -> int:
        """Samples the next token and appends it to the session (unlike llama-cpp-python,
        whose sample leaves the eval of the token to the caller: do not eval it again)."""
        self._set_sampler(temp, top_k, top_p, min_p, repeat_penalty, presence_penalty,
                          penalty_last_n, seed, frequency_penalty)
        return self._session.decode()

    def generate(self, tokens, top_k: int = 40, top_p: float = 0.95, min_p: float = 0.05,
                 temp: float = 0.80, repeat_penalty: float = 1.0, presence_penalty: float = 0.0,
                 penalty_last_n: int = 64, reset: bool = True, seed: int | None = None,
                 frequency_penalty: float = 0.0) -> Iterator[int]:
        """Prefills tokens (after a reset when `reset`) and yields sampled tokens, end-of-
        generation tokens included, until the caller stops or the context is full."""
        if reset:
            self.reset()
        self.eval(tokens)
        self._set_sampler(temp, top_k, top_p, min_p, repeat_penalty, presence_penalty,
                          penalty_last_n, seed, frequency_penalty)
        while True:
            try:
                yield self._session.decode()
            except GeistError as e:
                if e.status == 11:
                    return
                raise

    def logits(self, numpy: bool = False):
        return self._session.logits(numpy=numpy)

    # -- state --
    def save_state(self) -> LlamaState:
        return LlamaState(image=self._session.snapshot(), n_tokens=self._session.position,
                          rng_state=self._rng.getstate(), seed=self.seed)

    def load_state(self, state: LlamaState) -> None:
        if not isinstance(state, LlamaState):
            raise TypeError(f"state must be a LlamaState, not {type(state).__name__}")
        self._session.restore(state.image)  # refused: nothing changed
        self._rng.setstate(state.rng_state)
        self._sampler_key = None

    # -- completions --
    def _prompt_tokens(self, prompt) -> list[int]:
        if isinstance(prompt, (str, bytes)):
            return self._model.tokenize(prompt, add_special=True, parse_special=True)
        return list(prompt)

    def set_cache(self, cache: PrefixCache | None) -> None:
        """Completions restore the longest cached prefix of their prompt and prefill only the
        rest (geist.PrefixCache); None turns it off."""
        if cache is not None and not isinstance(cache, PrefixCache):
            raise TypeError("cache must be a geist.PrefixCache or None")
        self.cache = cache

    def _prefill_prompt(self, prompt_tokens) -> None:
        """Resets the session to exactly the prompt's prefilled state, through the cache."""
        cache = self.cache
        if cache is None:
            self.reset()
            self._session.prefill(prompt_tokens)
            return
        key, image, common = cache.lookup(prompt_tokens)
        if image is not None:
            self._session.restore(image)
            self._sampler_key = None
        else:
            self.reset()
        n, b = len(prompt_tokens), cache.block
        pos = len(key)
        # block boundaries worth caching: the last one inside the shared beginning, the last
        # one inside the prompt
        keep = {(common // b) * b, ((n - 1) // b) * b} - {0}
        while pos < n:
            end = min((pos // b + 1) * b, n)
            self._session.prefill(prompt_tokens[pos:end])
            pos = end
            if pos in keep or pos == n:
                cache.put(prompt_tokens[:pos], self._session.snapshot())

    def _decode_text(self, prompt_tokens, max_tokens, sampling, seed):
        """Yields (text, n_completion_tokens, finish_reason or None) for one generation."""
        self._prefill_prompt(prompt_tokens)
        self._set_sampler(*sampling[:7], seed, *sampling[7:])
        limit = -1 if max_tokens is None or max_tokens <= 0 else int(max_tokens)
        dec = codecs.getincrementaldecoder("utf-8")("replace")
        n = 0
        finish = "length"
        while limit < 0 or n < limit:
            try:
                tok = self._session.decode()
            except GeistError as e:
                if e.status == 11:
                    break
                raise
            if self._model.is_eog(tok):
                finish = "stop"
                break
            n += 1
            yield dec.decode(self._model.token_to_piece(tok)), n, None
        yield dec.decode(b"", final=True), n, finish

    def create_completion(self, prompt, suffix=None, max_tokens: int | None = 16,
                          temperature: float = 0.8, top_p: float = 0.95, min_p: float = 0.05,
                          echo: bool = False, stop=None, presence_penalty: float = 0.0,
                          repeat_penalty: float = 1.0, top_k: int = 40, stream: bool = False,
                          seed: int | None = None, penalty_last_n: int = 64, logprobs=None,
                          model: str | None = None, frequency_penalty: float = 0.0, **kwargs):
        """An OpenAI text completion dict, or with stream=True an iterator of chunks."""
        if suffix is not None or logprobs is not None:
            raise GeistUnsupported("suffix and logprobs are not supported")
        if kwargs:
            raise TypeError(f"unknown argument(s): {', '.join(sorted(kwargs))}")
        stops = _stops(stop)
        prompt_tokens = self._prompt_tokens(prompt)
        sampling = (temperature, top_k, top_p, min_p, repeat_penalty, presence_penalty,
                    penalty_last_n, frequency_penalty)
        cid = f"cmpl-{uuid.uuid4()}"
        created = int(time.time())
        name = model or self.model_path

        def chunks():
            matcher = _StopMatcher(stops)
            if echo:
                yield self._model.detokenize(prompt_tokens).decode("utf-8", "replace"), None, 0
            n = 0
            finish = None
            stopped = False
            for text, n, fin in self._decode_text(prompt_tokens, max_tokens, sampling, seed):
                out, stopped = matcher.feed(text)
                if out:
                    yield out, None, n
                if stopped:
                    finish = "stop"
                    break
                if fin is not None:
                    finish = fin
            rest = "" if stopped else matcher.finish()
            if rest:
                yield rest, None, n
            yield "", finish or "stop", n

        def chunk(text, finish):
            return {"id": cid, "object": "text_completion", "created": created, "model": name,
                    "choices": [{"text": text, "index": 0, "logprobs": None,
                                 "finish_reason": finish}]}

        if stream:
            def it():
                for text, finish, _ in chunks():
                    if text or finish:
                        yield chunk(text, finish)
            return it()
        parts = []
        finish, n = "stop", 0
        for text, fin, n in chunks():
            parts.append(text)
            finish = fin or finish
        out = chunk("".join(parts), finish)
        out["usage"] = {"prompt_tokens": len(prompt_tokens), "completion_tokens": n,
                        "total_tokens": len(prompt_tokens) + n}
        return out

    def __call__(self, prompt, **kwargs):
        return self.create_completion(prompt, **kwargs)

    def _chat_template(self) -> _ChatTemplate:
        if self._chat is None:
            self._chat = _ChatTemplate(self._model, self._chat_source)
        return self._chat

    def create_chat_completion(self, messages, tools=None, tool_choice=None,
                               temperature: float = 0.2, top_p: float = 0.95, top_k: int = 40,
                               min_p: float = 0.05, stream: bool = False, stop=None,
                               seed: int | None = None, max_tokens: int | None = None,
                               presence_penalty: float = 0.0, repeat_penalty: float = 1.0,
                               penalty_last_n: int = 64, model: str | None = None,
                               chat_template_kwargs: dict | None = None,
                               frequency_penalty: float = 0.0, **kwargs):
        """An OpenAI chat.completion dict, or with stream=True an iterator of
        chat.completion.chunk dicts. Rendered with the model's chat template (ChatML when it
        has none); reasoning and tool calls split out as the template's family writes them."""
        if kwargs:
            raise TypeError(f"unknown argument(s): {', '.join(sorted(kwargs))}")
        if not isinstance(messages, list):
            raise TypeError("messages must be a list of dicts")
        tmpl = self._chat_template()
        if tmpl.handle is None and (tools or chat_template_kwargs):
            raise GeistUnsupported("tools and chat_template_kwargs need geist's chat layer, "
                                   "which this libgeist lacks")
        prompt = tmpl.render(messages, tools, True, chat_template_kwargs)
        stops = _stops(stop)
        if tmpl.is_fallback:
            stops.append("<|im_end|>")
        prompt_tokens = self._model.tokenize(prompt, add_special=True, parse_special=True)
        sampling = (temperature, top_k, top_p, min_p, repeat_penalty, presence_penalty,
                    penalty_last_n, frequency_penalty)
        cid = f"chatcmpl-{uuid.uuid4()}"
        created = int(time.time())
        name = model or self.model_path
        usage = {}

        def deltas():
            parser = _OutputParser(tmpl, prompt, stops, tools)
            try:
                finish = "stop"
                n = 0
                stopped = False
                for text, n, fin in self._decode_text(prompt_tokens, max_tokens, sampling, seed):
                    if text:
                        ds, stopped = parser.feed(text)
                        yield from ds
                    if stopped:
                        break
                    if fin is not None:
                        finish = fin
                if stopped:
                    finish = "stop"
                ds, message = parser.finish()
                yield from ds
                usage.update(prompt_tokens=len(prompt_tokens), completion_tokens=n,
                             total_tokens=len(prompt_tokens) + n)
                yield {"_finish": finish, "_message": message}
            finally:
                parser.close()

        def openai_delta(d):
            # the parser's deltas are OpenAI's already; the contract's first draft named a
            # call {"tool_call": {...}}, mapped here too
            if "tool_call" in d:
                tc = d["tool_call"]
                out = {"index": tc.get("index", 0)}
                if "name" in tc:
                    out.update(id=tc.get("id"), type="function",
                               function={"name": tc["name"], "arguments": ""})
                else:
                    out["function"] = {"arguments": tc.get("arguments", "")}
                return {"tool_calls": [out]}
            return d

        if stream:
            def it():
                yield {"id": cid, "object": "chat.completion.chunk", "created": created,
                       "model": name, "choices": [{"index": 0, "delta": {"role": "assistant"},
                                                   "logprobs": None, "finish_reason": None}]}
                saw_tool = False
                for d in deltas():
                    if "_finish" in d:
                        finish = "tool_calls" if saw_tool else d["_finish"]
                        yield {"id": cid, "object": "chat.completion.chunk", "created": created,
                               "model": name, "choices": [{"index": 0, "delta": {},
                                                           "logprobs": None,
                                                           "finish_reason": finish}]}
                        return
                    saw_tool = saw_tool or "tool_call" in d or "tool_calls" in d
                    yield {"id": cid, "object": "chat.completion.chunk", "created": created,
                           "model": name, "choices": [{"index": 0, "delta": openai_delta(d),
                                                       "logprobs": None, "finish_reason": None}]}
            return it()

        content, reasoning = [], []
        message, finish = None, "stop"
        for d in deltas():
            if "_finish" in d:
                finish, message = d["_finish"], d["_message"]
            elif "content" in d:
                content.append(d["content"])
            elif "reasoning_content" in d:
                reasoning.append(d["reasoning_content"])
            elif "tool_call" in d or "tool_calls" in d:
                finish = "tool_calls"
        if message is None:
            message = {"role": "assistant", "content": "".join(content)}
            if reasoning:
                message["reasoning_content"] = "".join(reasoning)
        if message.get("tool_calls"):
            finish = "tool_calls"
        return {"id": cid, "object": "chat.completion", "created": created, "model": name,
                "choices": [{"index": 0, "message": message, "logprobs": None,
                             "finish_reason": finish}],
                "usage": usage}
