"""Exceptions: every geist_status is one class, carrying the library's own message."""

from __future__ import annotations


class GeistError(Exception):
    """Base class of every error geist raises. ``status`` is the C status code (0 for errors
    raised by the binding itself), ``status_name`` its name, ``message`` the library's text."""

    status = 0
    status_name = "GEIST_ERROR"

    def __init__(self, message: str = "", status: int | None = None):
        if status is not None:
            self.status = status
        self.message = message
        super().__init__(f"{self.status_name}: {message}" if message else self.status_name)

    def __reduce__(self):  # picklable (multiprocessing) with its message and status
        return (type(self), (self.message, self.status))


class GeistOutOfMemory(GeistError, MemoryError):
    status, status_name = 1, "GEIST_E_OOM"


class GeistInvalidArgument(GeistError, ValueError):
    status, status_name = 2, "GEIST_E_INVALID_ARG"


class GeistInternalError(GeistError, RuntimeError):
    status, status_name = 3, "GEIST_E_INTERNAL"


class GeistFileNotFound(GeistError, FileNotFoundError):
    status, status_name = 4, "GEIST_E_FILE_NOT_FOUND"


class GeistIOError(GeistError, OSError):
    status, status_name = 5, "GEIST_E_IO"


class GeistFormatError(GeistError, ValueError):
    """A malformed model file, snapshot image or snapshot file."""

    status, status_name = 6, "GEIST_E_FORMAT"


class GeistUnsupported(GeistError, NotImplementedError):
    status, status_name = 7, "GEIST_E_UNSUPPORTED"


class GeistNotFound(GeistError, LookupError):
    status, status_name = 8, "GEIST_E_NOT_FOUND"


class GeistBackendError(GeistError, RuntimeError):
    status, status_name = 9, "GEIST_E_BACKEND"


class GeistInvalidState(GeistError, RuntimeError):
    status, status_name = 10, "GEIST_E_INVALID_STATE"


class GeistTooManyTokens(GeistError, ValueError):
    """The session's context (n_ctx / max_seq_len) would be exceeded."""

    status, status_name = 11, "GEIST_E_TOO_MANY_TOKENS"


class GeistClosedError(GeistError, ValueError):
    """A model or session was used after close() (or after its model was closed)."""

    status_name = "GEIST_CLOSED"


class GeistABIError(GeistError, ImportError):
    """The loaded libgeist does not match the struct mirrors of this package."""

    status_name = "GEIST_ABI_MISMATCH"


_BY_STATUS = {
    cls.status: cls
    for cls in (GeistOutOfMemory, GeistInvalidArgument, GeistInternalError, GeistFileNotFound,
                GeistIOError, GeistFormatError, GeistUnsupported, GeistNotFound,
                GeistBackendError, GeistInvalidState, GeistTooManyTokens)
}


def error_for(status: int, message: str) -> GeistError:
    """The exception for a failing C status (an unknown code becomes a plain GeistError)."""
    cls = _BY_STATUS.get(status)
    if cls is None:
        return GeistError(f"unknown status {status}: {message}", status)
    return cls(message)
