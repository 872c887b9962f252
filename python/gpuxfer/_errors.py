"""gpuxfer's exceptions: one base class, one subclass per C++ ``gpuxfer::Errc`` code, and
``InvalidHostArrayError``, the ``invalid_argument`` of a host array argument (a ``TypeError`` too).

The extension module raises these for every ``gpuxfer::Error``; ``str(e)`` is the C++ ``what()``
("gpuxfer no_device: ..."), ``e.code`` the code's name and ``e.message`` the message without the prefix.
"""

from __future__ import annotations

from typing import Any


class Error(RuntimeError):
    """A gpuxfer operation failed. ``code`` says what kind of failure (an ``Errc`` name)."""

    code: str = "error"

    def __init__(self, text: str, code: str | None = None, message: str | None = None) -> None:
        if code is not None:
            self.code = code
        if message is None:  # raised in Python, with the message alone: worded as the C++ errors are
            message, text = text, f"gpuxfer {self.code}: {text}"
        super().__init__(text)
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        # pickle and copy rebuild from these, not from args alone (which would prefix the text again)
        return (type(self), (str(self), self.code, self.message), self.__dict__)


class InvalidArgumentError(Error, ValueError):
    """An argument is out of its domain (for example data larger than a destination)."""

    code = "invalid_argument"


class InvalidHostArrayError(InvalidArgumentError, TypeError):
    """A host array argument (``out``, ``data``, ``register_host``'s array) is not C-contiguous host memory
    (the buffer protocol or DLPack of the CPU or of CUDA host memory), or is read-only where the call
    writes it. No copy is made instead. A ``TypeError`` too, as these errors were before they had a code;
    ``BY_CODE`` keeps ``InvalidArgumentError`` for the code."""


class InvalidBufferError(Error, ValueError):
    """A device index is out of range, or a buffer is missing, freed or of the wrong device."""

    code = "invalid_buffer"


class InvalidOptionError(Error, ValueError):
    """An option or a GPUXFER_* environment variable is out of range."""

    code = "invalid_option"


class NoDeviceError(Error):
    """Fewer usable CUDA devices than ``min_devices`` (the message has the CUDA reason)."""

    code = "no_device"


class OutOfMemoryError(Error, MemoryError):
    """A device or pinned-host allocation failed, or the pinned pool's limit was reached."""

    code = "out_of_memory"


class UnsupportedError(Error):
    """The requested path cannot run on this machine (for example a peer copy without peer access)."""

    code = "unsupported"


class CudaError(Error):
    """A CUDA runtime or driver call failed."""

    code = "cuda_error"


class NcclError(Error):
    """An NCCL call failed."""

    code = "nccl_error"


class DeviceFaultError(Error):
    """A sticky device error (illegal address, launch failure): the device must be reset."""

    code = "device_fault"


class CommError(Error):
    """A job of several processes failed: a rank unreachable, missing, inconsistent or out of time, in the
    rendezvous, the NCCL communicator's creation, or an operation (after which that Communicator is
    aborted: every later call raises)."""

    code = "comm_error"


_ALL = (
    Error,
    InvalidArgumentError,
    InvalidHostArrayError,
    InvalidBufferError,
    InvalidOptionError,
    NoDeviceError,
    OutOfMemoryError,
    UnsupportedError,
    CudaError,
    NcclError,
    DeviceFaultError,
    CommError,
)

# They print as gpuxfer.NoDeviceError, where users catch them, not as this private module's.
for _cls in _ALL:
    _cls.__module__ = "gpuxfer"
del _cls

# The class of each C++ Errc; InvalidHostArrayError shares invalid_argument's code and is raised by name.
BY_CODE: dict[str, type[Error]] = {cls.code: cls for cls in _ALL if cls is not InvalidHostArrayError}
