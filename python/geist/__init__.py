"""geist: Python bindings of the geist inference engine (ctypes over libgeist.so).

    import geist
    llm = geist.Llama("model.gguf", n_ctx=2048)
    print(llm("Once upon a time", max_tokens=32)["choices"][0]["text"])

Sessions are values: snapshot() to bytes, restore(), fork(), save()/load(), pickle.
Importing the package checks that its struct mirrors match the library it loaded
(GeistABIError otherwise).
"""

from ._errors import (GeistABIError, GeistBackendError, GeistClosedError, GeistError,
                      GeistFileNotFound, GeistFormatError, GeistInternalError,
                      GeistInvalidArgument, GeistInvalidState, GeistIOError, GeistNotFound,
                      GeistOutOfMemory, GeistTooManyTokens, GeistUnsupported)
from ._core import BACKENDS, KV_MODES, Model, Session, abi_version, version
from .cache import PrefixCache
from .llama import Llama, LlamaState

__version__ = "0.1.0"

__all__ = [
    "Llama", "LlamaState", "PrefixCache", "Model", "Session", "version", "abi_version", "BACKENDS",
    "KV_MODES", "GeistError", "GeistABIError", "GeistBackendError", "GeistClosedError",
    "GeistFileNotFound", "GeistFormatError", "GeistInternalError", "GeistInvalidArgument",
    "GeistInvalidState", "GeistIOError", "GeistNotFound", "GeistOutOfMemory",
    "GeistTooManyTokens", "GeistUnsupported",
]
