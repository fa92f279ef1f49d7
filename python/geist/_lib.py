"""ctypes declarations of libgeist.so, and the check that they match the library loaded.

Every function is called through ctypes.CDLL, which releases the GIL for the duration of the
call: a forward pass on one thread never blocks Python code (or other sessions) on others.
"""

from __future__ import annotations

import ctypes
import json
import os
from ctypes import (CFUNCTYPE, POINTER, c_char_p, c_double, c_float, c_int, c_int32, c_size_t,
                    c_uint32, c_uint64, c_void_p)

from ._errors import GeistABIError

#: The GEIST_ABI_VERSION (include/geist/geist_abi.h) these mirrors were written for.
ABI_VERSION = 2

geist_status = c_int
geist_token = c_int32
LOG_FN = CFUNCTYPE(None, c_void_p, c_int, c_char_p)
PROGRESS_FN = CFUNCTYPE(c_int, c_void_p, c_float)


class ModelParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("log_fn", LOG_FN),
        ("log_user", c_void_p),
        ("progress_fn", PROGRESS_FN),
        ("progress_user", c_void_p),
        ("backend", c_int32),
        ("vocab_only", c_int32),
    ]


class SamplerParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("temperature", c_float),
        ("top_k", c_int32),
        ("top_p", c_float),
        ("min_p", c_float),
        ("repeat_penalty", c_float),
        ("presence_penalty", c_float),
        ("penalty_last_n", c_int32),
        ("seed", c_uint64),
        ("frequency_penalty", c_float),
    ]


class SessionParams(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_uint32),
        ("max_seq_len", c_int32),
        ("n_threads", c_int32),
        ("sampler", SamplerParams),
        ("kv_mode", c_int32),
    ]


#: C struct name -> its mirror here.
MIRRORS = {
    "geist_model_params": ModelParams,
    "geist_sampler_params": SamplerParams,
    "geist_session_params": SessionParams,
}

_P = c_void_p  # every opaque handle
_TOK_P = POINTER(geist_token)
_SIGNATURES = {
    # name: (restype, argtypes)
    "geist_abi_version": (c_uint32, []),
    "geist_abi_layout": (c_char_p, []),
    "geist_status_string": (c_char_p, [geist_status]),
    "geist_version": (c_char_p, []),
    "geist_model_params_default": (None, [POINTER(ModelParams)]),
    "geist_model_load": (geist_status, [c_char_p, POINTER(ModelParams), POINTER(_P), c_char_p,
                                        c_size_t]),
    "geist_model_free": (None, [_P]),
    "geist_model_last_error": (c_char_p, [_P]),
    "geist_model_n_vocab": (c_int32, [_P]),
    "geist_model_n_ctx_train": (c_int32, [_P]),
    "geist_model_token_bos": (geist_token, [_P]),
    "geist_model_token_eos": (geist_token, [_P]),
    "geist_model_token_is_eog": (c_int, [_P, geist_token]),
    "geist_tokenize": (geist_status, [_P, c_char_p, c_size_t, c_int, c_int, _TOK_P, c_size_t,
                                      POINTER(c_size_t)]),
    "geist_detokenize": (geist_status, [_P, _TOK_P, c_size_t, c_char_p, c_size_t,
                                        POINTER(c_size_t)]),
    "geist_token_to_piece": (geist_status, [_P, geist_token, c_char_p, c_size_t,
                                            POINTER(c_size_t)]),
    "geist_model_describe": (geist_status, [_P, c_char_p, c_size_t, POINTER(c_size_t)]),
    "geist_sampler_params_default": (None, [POINTER(SamplerParams)]),
    "geist_session_params_default": (None, [POINTER(SessionParams)]),
    "geist_session_create": (geist_status, [_P, POINTER(SessionParams), POINTER(_P)]),
    "geist_session_destroy": (None, [_P]),
    "geist_session_last_error": (c_char_p, [_P]),
    "geist_session_prefill": (geist_status, [_P, _TOK_P, c_size_t]),
    "geist_session_prefill_text": (geist_status, [_P, c_char_p, c_size_t, c_int]),
    "geist_session_decode": (geist_status, [_P, POINTER(geist_token)]),
    "geist_session_peek": (geist_status, [_P, POINTER(geist_token)]),
    "geist_session_rewind": (geist_status, [_P, c_int32]),
    "geist_session_logits": (geist_status, [_P, POINTER(POINTER(c_float)), POINTER(c_int32)]),
    "geist_session_reset": (geist_status, [_P]),
    "geist_session_position": (c_int32, [_P]),
    "geist_session_max_seq_len": (c_int32, [_P]),
    "geist_session_prefill_grid": (c_int32, [_P]),
    "geist_session_set_sampler": (geist_status, [_P, POINTER(SamplerParams)]),
    "geist_session_tokens": (geist_status, [_P, POINTER(_TOK_P), POINTER(c_size_t)]),
    "geist_session_snapshot_size": (geist_status, [_P, POINTER(c_size_t)]),
    "geist_session_snapshot": (geist_status, [_P, c_void_p, c_size_t, POINTER(c_size_t)]),
    "geist_session_restore": (geist_status, [_P, c_char_p, c_size_t]),
    "geist_session_save_file": (geist_status, [_P, c_char_p]),
    "geist_session_load_file": (geist_status, [_P, c_char_p]),
    "geist_session_pin_prefix": (geist_status, [_P]),
    "geist_session_reset_to_prefix": (geist_status, [_P]),
    "geist_session_pin_len": (c_int32, [_P]),
    "geist_model_time_copies": (geist_status, [_P, c_size_t, POINTER(c_double),
                                               POINTER(c_double)]),
}

#: Optional: the chat layer (geist_chat.h); used when the loaded library has it.
_CHAT_SIGNATURES = {
    "geist_chat_template_from_model": (geist_status, [_P, c_char_p, POINTER(_P), POINTER(c_int),
                                                      c_char_p, c_size_t]),
    "geist_chat_template_create_for_model": (geist_status, [_P, c_char_p, c_size_t, POINTER(_P),
                                                            c_char_p, c_size_t]),
    "geist_chat_template_free": (None, [_P]),
    "geist_chat_template_last_error": (c_char_p, [_P]),
    "geist_chat_template_source": (c_char_p, [_P]),
    "geist_chat_render": (geist_status, [_P, c_char_p, c_size_t, c_char_p, c_size_t,
                                         POINTER(c_size_t)]),
    "geist_chat_parser_create": (geist_status, [_P, c_char_p, c_size_t, c_char_p, c_size_t,
                                                POINTER(_P), c_char_p, c_size_t]),
    "geist_chat_parser_free": (None, [_P]),
    "geist_chat_parser_feed": (geist_status, [_P, c_char_p, c_size_t, POINTER(c_char_p),
                                              POINTER(c_int)]),
    "geist_chat_parser_finish": (geist_status, [_P, POINTER(c_char_p), POINTER(c_char_p)]),
}


def check_layout(layout: dict, abi_version: int) -> None:
    """Raises GeistABIError unless `layout` (geist_abi_layout's JSON) and `abi_version` match
    the mirrors above: every struct's size and every field's name, offset and size."""
    if abi_version != ABI_VERSION:
        raise GeistABIError(
            f"libgeist has ABI version {abi_version}, this geist package was written for "
            f"{ABI_VERSION}: install the package built with the same geist sources")
    if layout.get("pointer_size") != ctypes.sizeof(c_void_p):
        raise GeistABIError(f"libgeist has {layout.get('pointer_size')}-byte pointers, this "
                            f"Python {ctypes.sizeof(c_void_p)}-byte ones")
    structs = layout.get("structs", {})
    for name, mirror in MIRRORS.items():
        c = structs.get(name)
        if c is None:
            raise GeistABIError(f"libgeist does not describe struct {name}")
        fields = c.get("fields", {})
        ours = [f[0] for f in mirror._fields_]
        if sorted(ours) != sorted(fields):
            raise GeistABIError(f"struct {name}: libgeist has fields {sorted(fields)}, the "
                                f"binding mirrors {sorted(ours)}")
        for fname in ours:
            desc = getattr(mirror, fname)
            want = [desc.offset, desc.size]
            if list(fields[fname]) != want:
                raise GeistABIError(
                    f"struct {name}.{fname}: libgeist has [offset, size] {list(fields[fname])}, "
                    f"the binding {want}")
        if c.get("size") != ctypes.sizeof(mirror):
            raise GeistABIError(f"struct {name}: libgeist's is {c.get('size')} bytes, the "
                                f"binding's {ctypes.sizeof(mirror)}")


def library_path() -> str:
    """Where libgeist.so is taken from: $GEIST_LIBRARY, else the copy bundled in the package."""
    env = os.environ.get("GEIST_LIBRARY")
    if env:
        return env
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "libgeist.so")


def load() -> tuple[ctypes.CDLL, bool]:
    """Loads the library, declares every function, checks the layouts. Returns the library and
    whether it has the chat layer."""
    path = library_path()
    if not os.path.exists(path):
        raise GeistABIError(
            f"libgeist.so not found at {path}: install the package with `pip install ./python` "
            "after building the geist_shared target, or set GEIST_LIBRARY to the library")
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise GeistABIError(f"cannot load {path}: {e}") from e
    for name in ("geist_abi_version", "geist_abi_layout"):
        if not hasattr(lib, name):
            raise GeistABIError(f"{path} has no {name}: it predates the ABI check (rebuild it)")
    for name, (res, args) in _SIGNATURES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise GeistABIError(f"{path} lacks {name}") from None
        fn.restype, fn.argtypes = res, args
    has_chat = all(hasattr(lib, name) for name in _CHAT_SIGNATURES)
    if has_chat:
        for name, (res, args) in _CHAT_SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
    try:
        layout = json.loads(lib.geist_abi_layout().decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise GeistABIError(f"{path}: geist_abi_layout() is not valid JSON: {e}") from e
    check_layout(layout, lib.geist_abi_version())
    return lib, has_chat
