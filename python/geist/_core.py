"""Model and Session: the C handles, owned by Python objects that cannot be misused into a crash.

Safety rules kept here, so that no call can crash the interpreter:
- every argument is converted and range-checked in Python before it reaches C (wrong types
  raise TypeError, out-of-range integers OverflowError / GeistInvalidArgument);
- a closed object raises GeistClosedError; a session keeps its model alive, and closing a
  model closes its sessions first (the C library may not free a model with live sessions);
- a session is used by one thread at a time (the C contract): each call holds the session's
  lock; a model is shared and close() waits for the calls in flight on it.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
import weakref
from array import array
from ctypes import POINTER, byref, c_char_p, c_float, c_int32, c_size_t, c_void_p

from . import _lib
from ._errors import GeistClosedError, GeistError, GeistInvalidArgument, error_for
from ._lifetime import Closeable

_LIB, HAS_CHAT = _lib.load()

BACKENDS = {"auto": 0, "cpu": 1, "cuda": 2, "cpu-device-local": 3}
KV_MODES = {"f32": 0, "f16": 1, "q8": 2, "q4": 3, "kivi4": 4, "kivi2": 5}
_LOG_LEVELS = {0: "debug", 1: "info", 2: "warn", 3: "error"}


def version() -> str:
    """The library's version, e.g. "0.1.0"."""
    return _LIB.geist_version().decode()


def abi_version() -> int:
    return int(_LIB.geist_abi_version())


def _check(status: int, message) -> None:
    if status != 0:
        msg = message() if callable(message) else message
        if isinstance(msg, bytes):
            msg = msg.decode("utf-8", "replace")
        if not msg:
            msg = _LIB.geist_status_string(status).decode()
        raise error_for(status, msg)


def _text_bytes(text, what: str = "text") -> bytes:
    if isinstance(text, str):
        return text.encode("utf-8")
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    raise TypeError(f"{what} must be str or bytes, not {type(text).__name__}")


def _path_bytes(path) -> bytes:
    p = os.fsencode(os.fspath(path))
    if b"\0" in p:
        raise ValueError("path contains a NUL byte")
    return p


def _token_array(tokens):
    """(ctypes int32 array or None, count) for a sequence of token ids."""
    if isinstance(tokens, (str, bytes, bytearray)):
        raise TypeError("tokens must be a sequence of int token ids, not text")
    if isinstance(tokens, int):
        tokens = [tokens]
    try:
        arr = array("i", tokens)
    except OverflowError:
        raise GeistInvalidArgument("a token id does not fit in 32 bits") from None
    except TypeError:
        raise TypeError("tokens must be a sequence of int token ids") from None
    n = len(arr)
    if n == 0:
        return None, 0
    return (c_int32 * n).from_buffer(arr), n


def _as_int(v, what: str, lo: int = -(2**31), hi: int = 2**31 - 1) -> int:
    if isinstance(v, bool) or not hasattr(v, "__index__"):
        raise TypeError(f"{what} must be an int, not {type(v).__name__}")
    v = v.__index__()
    if not lo <= v <= hi:
        raise GeistInvalidArgument(f"{what} = {v} is outside [{lo}, {hi}]")
    return v


def _as_float(v, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) and not hasattr(v, "__float__"):
        raise TypeError(f"{what} must be a number, not {type(v).__name__}")
    return float(v)


def _enum(value, table: dict, what: str) -> int:
    if isinstance(value, str):
        try:
            return table[value.lower()]
        except KeyError:
            raise GeistInvalidArgument(
                f"unknown {what} {value!r} (one of {', '.join(table)})") from None
    v = _as_int(value, what)
    if v not in table.values():
        raise GeistInvalidArgument(f"unknown {what} {v}")
    return v


def _read_buffer(call):
    """Runs call(buf, cap, n_out) under the buffer protocol (retry with the size needed)."""
    n = c_size_t(0)
    cap = 256
    while True:
        buf = ctypes.create_string_buffer(cap)
        status = call(buf, cap, byref(n))
        if status == 2 and n.value > cap:  # GEIST_E_INVALID_ARG: buffer too small
            cap = n.value
            continue
        return status, buf.raw[: n.value]


class SamplerSettings:
    """geist_sampler_params as keyword arguments (names as the C struct has them)."""

    FIELDS = ("temperature", "top_k", "top_p", "min_p", "repeat_penalty", "presence_penalty",
              "penalty_last_n", "seed", "frequency_penalty")

    @staticmethod
    def to_c(base: _lib.SamplerParams | None = None, **kw) -> _lib.SamplerParams:
        p = _lib.SamplerParams()
        if base is None:
            _LIB.geist_sampler_params_default(byref(p))
        else:
            ctypes.pointer(p)[0] = base
        for k, v in kw.items():
            if v is None:
                continue
            if k not in SamplerSettings.FIELDS:
                raise TypeError(f"unknown sampler setting {k!r}")
            if k == "seed":
                setattr(p, k, _as_int(v, k, 0, 2**64 - 1))
            elif k in ("top_k", "penalty_last_n"):
                setattr(p, k, _as_int(v, k))
            else:
                setattr(p, k, _as_float(v, k))
        return p


class Model(Closeable):
    """A loaded GGUF model: immutable, shared by its sessions and by threads.

    backend: "auto", "cpu", "cuda" or "cpu-device-local". verbose: the library's log lines go
    to stderr (otherwise nowhere)."""

    _shared_lock = threading.Lock()
    _shared: "weakref.WeakValueDictionary[tuple, Model]" = weakref.WeakValueDictionary()

    def __init__(self, path, backend="auto", verbose: bool = False):
        self._handle = None
        self._sessions: "weakref.WeakSet[Session]" = weakref.WeakSet()
        self._cv = threading.Condition()
        self._in_flight = 0
        self._closing = False
        self.path = os.path.abspath(os.fspath(path))
        self.backend = _enum(backend, BACKENDS, "backend")
        self.verbose = bool(verbose)
        params = _lib.ModelParams()
        _LIB.geist_model_params_default(byref(params))
        params.backend = self.backend
        if self.verbose:
            def log(user, level, msg):
                try:
                    sys.stderr.write(f"geist {_LOG_LEVELS.get(level, level)}: "
                                     f"{msg.decode('utf-8', 'replace')}\n")
                except Exception:  # never let a logging failure unwind into C
                    pass
            self._log_fn = _lib.LOG_FN(log)  # kept alive as long as the model
            params.log_fn = self._log_fn
        handle = c_void_p()
        err = ctypes.create_string_buffer(1024)
        status = _LIB.geist_model_load(_path_bytes(self.path), byref(params), byref(handle), err,
                                       len(err))
        _check(status, err.value)
        self._handle = handle.value
        self.n_vocab = int(_LIB.geist_model_n_vocab(self._handle))
        self.n_ctx_train = int(_LIB.geist_model_n_ctx_train(self._handle))
        self.token_bos = int(_LIB.geist_model_token_bos(self._handle))
        self.token_eos = int(_LIB.geist_model_token_eos(self._handle))

    @classmethod
    def shared(cls, path, backend="auto") -> "Model":
        """One Model per (path, backend) in this process, loaded on first use (what unpickled
        sessions use, so that many of them share the weights)."""
        key = (os.path.abspath(os.fspath(path)), _enum(backend, BACKENDS, "backend"))
        with cls._shared_lock:
            m = cls._shared.get(key)
            if m is None or m.closed:
                m = cls(key[0], key[1])
                cls._shared[key] = m
            return m

    def __reduce__(self):
        return (Model.shared, (self.path, self.backend))

    # -- lifetime --
    @property
    def closed(self) -> bool:
        return self._handle is None

    def _enter(self):
        with self._cv:
            if self._handle is None or self._closing:
                raise GeistClosedError("the model is closed")
            self._in_flight += 1
            return self._handle

    def _leave(self):
        with self._cv:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._cv.notify_all()

    def _call(self, fn, *args):
        h = self._enter()
        try:
            return fn(h, *args)
        finally:
            self._leave()

    def _error(self, h) -> str:
        return _LIB.geist_model_last_error(h).decode("utf-8", "replace")

    def close(self) -> None:
        """Frees the model; closes its sessions first. Idempotent. Later use raises
        GeistClosedError. Waits for calls in flight on the model and on its sessions."""
        with self._cv:
            if self._handle is None or self._closing:
                return
            self._closing = True  # no new calls, so no new sessions
            while self._in_flight:
                self._cv.wait()
        for s in list(self._sessions):
            s.close()
        with self._cv:
            h, self._handle = self._handle, None
        _LIB.geist_model_free(h)

    # -- vocabulary --
    def tokenize(self, text, add_special: bool = True, parse_special: bool = False) -> list[int]:
        data = _text_bytes(text)

        def run(h):
            cap = len(data) + 8
            while True:
                out = (c_int32 * cap)()
                n = c_size_t(0)
                st = _LIB.geist_tokenize(h, data, len(data), int(bool(add_special)),
                                         int(bool(parse_special)), out, cap, byref(n))
                if st == 2 and n.value > cap:
                    cap = n.value
                    continue
                _check(st, lambda: self._error(h))
                return list(out[: n.value])

        return self._call(run)

    def detokenize(self, tokens) -> bytes:
        arr, n = _token_array(tokens)

        def run(h):
            st, data = _read_buffer(
                lambda buf, cap, n_out: _LIB.geist_detokenize(h, arr, n, buf, cap, n_out))
            _check(st, lambda: self._error(h))
            return data

        return self._call(run)

    def token_to_piece(self, token) -> bytes:
        t = _as_int(token, "token")

        def run(h):
            st, data = _read_buffer(
                lambda buf, cap, n_out: _LIB.geist_token_to_piece(h, t, buf, cap, n_out))
            _check(st, lambda: self._error(h))
            return data

        return self._call(run)

    def text(self, tokens) -> str:
        """Generated tokens as the output stream shows them: their pieces concatenated, as
        UTF-8 (invalid sequences replaced). Unlike detokenize, keeps a leading space."""
        return b"".join(self.token_to_piece(t) for t in tokens).decode("utf-8", "replace")

    def is_eog(self, token) -> bool:
        t = _as_int(token, "token")
        return bool(self._call(_LIB.geist_model_token_is_eog, t))

    def describe(self) -> str:
        def run(h):
            st, data = _read_buffer(
                lambda buf, cap, n_out: _LIB.geist_model_describe(h, buf, cap, n_out))
            _check(st, lambda: self._error(h))
            return data.decode("utf-8", "replace")

        return self._call(run)

    def session(self, **kw) -> "Session":
        """A new Session on this model (keyword arguments as Session's)."""
        return Session(self, **kw)


class Session(Closeable):
    """One decoding state on a model: token history, KV / recurrent state, pending logits,
    sampler and RNG. Snapshot it to bytes, restore, fork, save to a file, pickle it: the
    continuation is bit-identical (tokens and logits, greedy and sampled).

    n_ctx: capacity in tokens (0: min(training context, 4096)); n_threads: compute threads
    (0: all cores); kv_mode: "f32", "f16", "q8", "q4", "kivi4", "kivi2"; sampler settings as
    keywords (temperature, top_k, top_p, min_p, repeat_penalty, presence_penalty,
    frequency_penalty, penalty_last_n, seed).

    A session is used by one thread at a time (calls from other threads wait); different
    sessions run in parallel on different threads, the GIL released while they compute."""

    def __init__(self, model: Model, n_ctx: int = 0, n_threads: int = 0, kv_mode="f16", **sampler):
        if not isinstance(model, Model):
            raise TypeError(f"model must be a geist.Model, not {type(model).__name__}")
        self._handle = None
        self._lock = threading.RLock()
        self.model = model  # keeps the model alive as long as the session
        p = _lib.SessionParams()
        _LIB.geist_session_params_default(byref(p))
        p.max_seq_len = _as_int(n_ctx, "n_ctx", 0)
        p.n_threads = _as_int(n_threads, "n_threads", 0)
        p.kv_mode = _enum(kv_mode, KV_MODES, "kv_mode")
        p.sampler = SamplerSettings.to_c(**sampler)
        self.n_threads = p.n_threads
        self.kv_mode = p.kv_mode
        handle = c_void_p()

        def create(h):
            st = _LIB.geist_session_create(h, byref(p), byref(handle))
            _check(st, lambda: model._error(h))
            self._handle = handle.value
            model._sessions.add(self)  # while the model cannot start closing

        model._call(create)
        self.n_ctx = int(_LIB.geist_session_max_seq_len(self._handle))

    # -- lifetime --
    @property
    def closed(self) -> bool:
        return self._handle is None

    def close(self) -> None:
        """Destroys the session (idempotent); later use raises GeistClosedError."""
        with self._lock:
            h, self._handle = self._handle, None
            if h is not None:
                _LIB.geist_session_destroy(h)
                self.model._sessions.discard(self)

    def _h(self):
        if self._handle is None:
            raise GeistClosedError("the session is closed" if not self.model.closed else
                                   "the session's model was closed")
        return self._handle

    def _error(self) -> str:
        return _LIB.geist_session_last_error(self._handle).decode("utf-8", "replace")

    def _run(self, fn, *args):
        with self._lock:
            st = fn(self._h(), *args)
            _check(st, self._error)

    # -- decoding --
    def prefill(self, tokens, add_special: bool = True) -> None:
        """Appends tokens (a list of ids) or text (str: tokenized with special tokens parsed,
        BOS only at position 0 when add_special) and runs them through the model."""
        if isinstance(tokens, (str, bytes)):
            data = _text_bytes(tokens)
            self._run(_LIB.geist_session_prefill_text, data, len(data), int(bool(add_special)))
            return
        arr, n = _token_array(tokens)
        self._run(_LIB.geist_session_prefill, arr, n)

    def decode(self) -> int:
        """Samples the next token from the pending logits, appends it and returns it."""
        tok = c_int32(0)
        self._run(_LIB.geist_session_decode, byref(tok))
        return tok.value

    def peek(self) -> int:
        """The token decode() would return now, the session unchanged (geist_session_peek;
        GeistInvalidState while a forward is owed, i.e. right after a decode)."""
        tok = c_int32(0)
        self._run(_LIB.geist_session_peek, byref(tok))
        return tok.value

    def rewind(self, n_tokens: int) -> None:
        """Forgets the tokens from position n_tokens on (geist_session_rewind): exact on
        attention-only models where prefill wrote those positions; no logits are pending until
        the next prefill. GeistInvalidState (nothing changed) where the state cannot continue
        there, e.g. a hybrid's recurrent layers."""
        self._run(_LIB.geist_session_rewind, _as_int(n_tokens, "n_tokens"))

    def stream(self, max_tokens: int = -1, stop_at_eog: bool = True):
        """Yields decoded tokens until an end-of-generation token (not yielded), max_tokens
        (< 0: no limit) or a full context."""
        max_tokens = _as_int(max_tokens, "max_tokens")
        n = 0
        while max_tokens < 0 or n < max_tokens:
            try:
                tok = self.decode()
            except GeistError as e:
                if e.status == 11:  # context full
                    return
                raise
            if stop_at_eog and self.model.is_eog(tok):
                return
            n += 1
            yield tok

    def generate(self, max_tokens: int = -1, stop_at_eog: bool = True) -> list[int]:
        """The tokens stream() yields, as a list."""
        return list(self.stream(max_tokens, stop_at_eog))

    def logits(self, numpy: bool = False):
        """The pending logits [n_vocab] (a copy): list of floats, or a numpy array."""
        ptr = POINTER(c_float)()
        n = c_int32(0)
        with self._lock:
            self._run(_LIB.geist_session_logits, byref(ptr), byref(n))
            if numpy:
                import numpy as np
                return np.ctypeslib.as_array(ptr, (n.value,)).copy()
            out = array("f")
            out.frombytes(ctypes.string_at(ptr, n.value * 4))
            return out.tolist()

    def reset(self) -> None:
        """Forgets all tokens; keeps settings; re-seeds the RNG."""
        self._run(_LIB.geist_session_reset)

    def set_sampler(self, **kw) -> None:
        """Replaces the sampler settings (unnamed ones take their defaults) and re-seeds the
        RNG from `seed`."""
        p = SamplerSettings.to_c(**kw)
        self._run(_LIB.geist_session_set_sampler, byref(p))

    @property
    def position(self) -> int:
        """Tokens in the history (the next token's position)."""
        with self._lock:
            return int(_LIB.geist_session_position(self._h()))

    @property
    def prefill_grid(self) -> int:
        """The prefill grid G: prefix states prefilled to a multiple of G restore and continue
        bit-identically to the unsplit prefill (64 with recurrent layers, 1 for attention-only
        models; geist_session_prefill_grid)."""
        with self._lock:
            return int(_LIB.geist_session_prefill_grid(self._h()))

    @property
    def tokens(self) -> list[int]:
        """The token history."""
        ptr = POINTER(c_int32)()
        n = c_size_t(0)
        with self._lock:
            self._run(_LIB.geist_session_tokens, byref(ptr), byref(n))
            return list(ptr[: n.value]) if n.value else []

    # -- state --
    def snapshot(self) -> bytes:
        """The session's complete state as bytes (docs/SNAPSHOT_FORMAT.md)."""
        with self._lock:
            size = c_size_t(0)
            self._run(_LIB.geist_session_snapshot_size, byref(size))
            buf = ctypes.create_string_buffer(max(size.value, 1))
            written = c_size_t(0)
            self._run(_LIB.geist_session_snapshot, buf, size.value, byref(written))
            return buf.raw[: written.value]

    def restore(self, image) -> None:
        """Replaces the state with a snapshot's. A refused image (GeistFormatError naming the
        failed check) leaves the session exactly as it was."""
        if isinstance(image, str) or not isinstance(image, (bytes, bytearray, memoryview)):
            raise TypeError(f"image must be bytes, not {type(image).__name__}")
        data = bytes(image)
        self._run(_LIB.geist_session_restore, data, len(data))

    def save(self, path) -> None:
        """Snapshot into a file, atomically (temp file, fsync, rename)."""
        self._run(_LIB.geist_session_save_file, _path_bytes(path))

    def load(self, path) -> None:
        """Restore from a file written by save() (same rules as restore())."""
        self._run(_LIB.geist_session_load_file, _path_bytes(path))

    def fork(self) -> "Session":
        """A new session of the same model and settings, in this session's exact state."""
        with self._lock:
            image = self.snapshot()
            other = Session(self.model, n_ctx=self.n_ctx, n_threads=self.n_threads,
                            kv_mode=self.kv_mode)
        try:
            other.restore(image)
        except BaseException:
            other.close()
            raise
        return other

    def pin_prefix(self) -> None:
        """Pins the current state as the session's prefix (see reset_to_prefix)."""
        self._run(_LIB.geist_session_pin_prefix)

    def reset_to_prefix(self) -> None:
        """Returns to exactly the pinned state (GeistInvalidState when nothing is pinned)."""
        self._run(_LIB.geist_session_reset_to_prefix)

    @property
    def pin_len(self) -> int:
        with self._lock:
            return int(_LIB.geist_session_pin_len(self._h()))

    def __reduce__(self):
        return (_unpickle_session,
                (self.model.path, self.model.backend, self.n_ctx, self.n_threads, self.kv_mode,
                 self.snapshot()))


def _unpickle_session(path, backend, n_ctx, n_threads, kv_mode, image) -> Session:
    s = Session(Model.shared(path, backend), n_ctx=n_ctx, n_threads=n_threads, kv_mode=kv_mode)
    s.restore(image)
    return s
