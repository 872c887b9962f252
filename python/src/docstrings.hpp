// The docstrings of the functions the extension module defines, each with a short example; the rules they
// follow (stream-ordered forms, what stays alive, when data is ready) are in docs/PYTHON.md, said once.
#pragma once

namespace gpuxfer::python::doc {

inline constexpr const char* manager = R"(The devices of this process, their links, copy streams and pinned staging memory.

Keyword arguments are Options fields; the GPUXFER_* environment fills the rest. Raises NoDeviceError
with fewer usable devices than min_devices (1 by default), InvalidOptionError naming a bad argument.

>>> m = gpuxfer.Manager(min_devices=0, host_threads=4)
>>> m.device_count, m.device_status)";

inline constexpr const char* manager_device = R"(The DeviceInfo of device ``index`` (0 to device_count - 1).

>>> m.device(0).name)";

inline constexpr const char* manager_link = R"("self", "same_gpu", "nvlink", "pcie_peer" or "host_staged": how ``src`` reaches ``dst``.

>>> m.link(0, 1)
'nvlink')";

inline constexpr const char* manager_peer_enabled = R"(True when ``src`` can read and write ``dst``'s memory directly.

>>> m.peer_enabled(0, 1))";

inline constexpr const char* pool_stats =
    R"(The pinned staging pool's counters in bytes: in_use, cached, pending, peak_in_use, limit,
allocations, reuses.

>>> m.pinned_pool_stats()["in_use"])";

inline constexpr const char* trim_pool = R"(Frees every cached pinned block (those in use stay).

>>> m.trim_pool())";

inline constexpr const char* close = R"(Ends the transfer now, as garbage collection would; later calls raise.

Waits for what stream-ordered calls still use, then lets go of the registered tensors. Refused while an
operation is in flight (another thread's call, a handle whose result is not collected).

>>> t.close())";

inline constexpr const char* clear_device_buffer = R"(Forgets device ``device``'s registered tensor.

>>> t.clear_device_buffer(0))";

inline constexpr const char* device_buffer = R"(The object registered on ``device``, or None.

>>> t.device_buffer(0) is x
True)";

inline constexpr const char* registered_range = R"((pointer, bytes) of ``device``'s registration, or None.

>>> t.registered_range(0))";

inline constexpr const char* copy_buffer = R"(Copies the host bytes ``data`` into device ``dst_device``'s registered tensor.

``src_device`` is the device whose staging resources are used. With ``stream=`` the copy is queued on
that stream (see docs/PYTHON.md: stream-ordered forms).

>>> t.copy_buffer(0, 1, numpy.arange(1024, dtype=numpy.uint8)))";

inline constexpr const char* copy_device_buffer =
    R"(Copies device ``src_device``'s registered tensor into ``dst_device``'s; returns when done.

``path``: CopyPath.automatic (peer when enabled, else staged through the host), .peer or .staged.

>>> t.copy_device_buffer(0, 1))";

inline constexpr const char* copy_device_buffer_async =
    R"(As copy_device_buffer, returning a TransferHandle at once.

>>> h = t.copy_device_buffer_async(0, 1)
>>> h.wait())";

inline constexpr const char* broadcast = R"(Copies the host bytes ``data`` into every device's registered tensor.

``path``: HostBroadcastPath.automatic, .per_device or .scatter_allgather.

>>> t.broadcast(b"\x01" * 4096))";

inline constexpr const char* broadcast_from_device =
    R"(Copies device ``root``'s registered tensor into every other device's.

``path``: DeviceBroadcastPath.automatic (NCCL when available), .nccl or .peer.

>>> t.broadcast_from_device(0))";

inline constexpr const char* gather = R"(Starts gathering every other device's tensor to the host; returns a GatherHandle.

``dst_device`` is skipped (its data is already where it is needed). ``handle.get()`` gives one numpy
array per device in ascending order, pinned, None for ``dst_device`` and unregistered devices.

>>> h = t.gather(0)
>>> arrays = h.get())";

inline constexpr const char* gather_blocking = R"(gather(dst_device).get(): the other devices' tensors as host arrays.

>>> arrays = t.gather_blocking(0)
>>> [a.nbytes if a is not None else 0 for a in arrays])";

inline constexpr const char* gather_all = R"(Every device's tensor to the host, one pinned numpy array per device.

With ``stream=`` it returns a GatherHandle at once, the arrays complete when ``stream`` gets past it.

>>> a0, a1 = t.gather_all())";

inline constexpr const char* gather_into = R"(Every device's tensor into the writable host array ``out``, back to back.

Returns one GatherPiece (device, offset, size) per device; ``skip_device`` leaves one out.

>>> out = numpy.empty(total_bytes, numpy.uint8)
>>> pieces = t.gather_into(out))";

inline constexpr const char* register_host = R"(Page-locks a writable C-contiguous host array until the registration is closed or dies.

Copies to and from registered memory go straight to its pages, with no staging. The registration holds
the array's buffer export, so a resizable one (bytearray) refuses to resize rather than move its bytes.

>>> with gpuxfer.register_host(array):
...     t.gather_into(array))";

inline constexpr const char* parse_size = R"(A byte count as GPUXFER_POOL_LIMIT reads it: K, M, G, T are powers of 1024.

>>> gpuxfer.parse_size("4GiB")
4294967296)";

inline constexpr const char* handle_ready = R"(True when the operation is done; never blocks.

>>> h.ready())";

inline constexpr const char* handle_wait = R"(Blocks (the GIL released) until the operation is done.

>>> h.wait())";

inline constexpr const char* handle_stream_wait =
    R"(Makes ``stream`` wait, on the GPU, for this operation before its later work; no host wait.

>>> h.stream_wait(torch.cuda.current_stream()))";

inline constexpr const char* handle_get = R"(Waits, then returns one numpy array per device; call once.

Ascending by device, None for the destination and where nothing was registered.

>>> arrays = t.gather(0).get())";

}  // namespace gpuxfer::python::doc
