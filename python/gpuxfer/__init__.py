"""gpuxfer: move data between GPUs and the host as fast as the links allow.

``import gpuxfer`` needs no GPU; making a ``Manager`` without one raises ``NoDeviceError`` (or gives a
manager of no devices with ``min_devices=0``), and so does making a ``Communicator`` (one rank of a job of
several processes over NCCL).
"""

from __future__ import annotations

from ._errors import (
    CommError,
    CudaError,
    DeviceFaultError,
    Error,
    InvalidArgumentError,
    InvalidBufferError,
    InvalidHostArrayError,
    InvalidOptionError,
    NcclError,
    NoDeviceError,
    OutOfMemoryError,
    UnsupportedError,
)
from ._gpuxfer import (
    CopyPath,
    DeviceBroadcastPath,
    DeviceInfo,
    GatherHandle,
    GatherPiece,
    HostBroadcastPath,
    HostRegistration,
    Manager,
    NumaPlacement,
    Options,
    PinnedBlock,
    TransferHandle,
    __version__,
    parse_size,
    register_host,
)
from ._blocks import copy_blocks
from ._communicator import Communicator
from ._pinned import PinnedArray
from ._streams import stream_handle
from ._transfer import Transfer

__all__ = [
    "copy_blocks",
    "CopyPath",
    "CudaError",
    "DeviceBroadcastPath",
    "DeviceFaultError",
    "CommError",
    "Communicator",
    "DeviceInfo",
    "Error",
    "GatherHandle",
    "GatherPiece",
    "HostBroadcastPath",
    "HostRegistration",
    "InvalidArgumentError",
    "InvalidBufferError",
    "InvalidHostArrayError",
    "InvalidOptionError",
    "Manager",
    "NcclError",
    "NoDeviceError",
    "NumaPlacement",
    "Options",
    "OutOfMemoryError",
    "PinnedArray",
    "PinnedBlock",
    "Transfer",
    "TransferHandle",
    "UnsupportedError",
    "__version__",
    "parse_size",
    "register_host",
    "stream_handle",
]
