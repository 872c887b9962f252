// _Communicator: gpuxfer::Communicator, one rank of a job of several processes, with the GIL released in
// every call that may wait (creation, each operation, synchronize, the destructor's finalisation). Each
// operation is one method whose stream= chooses the form: None the blocking one, a stream the _async one.
// Device memory arrives as (pointer, bytes) from gpuxfer/_arrays.py, as Transfer's does; host memory as
// any array host_view accepts. gpuxfer.Communicator (python/gpuxfer/_communicator.py) is the public face.
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nanobind/stl/chrono.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <gpuxfer/communicator.hpp>
#include <gpuxfer/error.hpp>

#include "bindings.hpp"
#include "host_memory.hpp"
#include "pinned_block.hpp"
#include "stream_order.hpp"

namespace gpuxfer::python {
namespace {

/// The communicator, and what its stream-ordered calls use until their streams get past them (a call
/// returns once queued: the caller may drop its tensors and host arrays at once). The C++ Communicator is
/// not thread-safe: calls from several Python threads (each with the GIL released) take turns on busy,
/// in whichever order they come, which every rank must then agree on. kept is touched with the GIL held.
struct PyCommunicator {
  explicit PyCommunicator(Communicator made)
      : comm(std::move(made)),
        rank{comm->rank()},
        world_size{comm->world_size()},
        ordinal{comm->device()},
        timeout{comm->timeout()} {}
  /// Finalises the NCCL communicator (bounded by the timeout) with the GIL released; then kept's
  /// destructor waits for the streams of what is still kept.
  ~PyCommunicator() {
    nb::gil_scoped_release gil;
    comm.reset();
  }
  PyCommunicator(const PyCommunicator&) = delete;
  PyCommunicator& operator=(const PyCommunicator&) = delete;

  /// The communicator, under busy.
  /// @throws Error(Errc::invalid_argument) once close() has ended it
  Communicator& live() {
    if (!comm) {
      throw Error(Errc::invalid_argument, "rank " + std::to_string(rank) + " of " + std::to_string(world_size) +
                                              ": the communicator is closed (Communicator.close)");
    }
    return *comm;
  }

  std::optional<Communicator> comm;  // engaged until close() or destruction
  int rank, world_size;              // what the closed communicator still tells
  int ordinal;                       // this rank's device, for marks on the legacy default stream
  std::chrono::milliseconds timeout;
  std::mutex busy;                   // held by the call in progress, GIL released
  KeptObjects kept;
};

void* pointer(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

CommunicatorOptions options_of(std::optional<int> device, std::optional<std::int64_t> timeout_ms) {
  CommunicatorOptions options;
  options.device = device;
  if (timeout_ms) options.timeout = std::chrono::milliseconds(*timeout_ms);
  return options;
}

// rank and world_size None: from_environment (gpuxfer.Communicator.from_environment), else the explicit form.
void init(PyCommunicator* self, std::optional<int> rank, std::optional<int> world_size,
          const std::string& init_address, std::optional<int> device,
          std::optional<std::int64_t> timeout_ms) {
  const CommunicatorOptions options = options_of(device, timeout_ms);
  std::optional<Communicator> made;
  {
    nb::gil_scoped_release gil;
    if (rank && world_size) {
      made.emplace(*rank, *world_size, init_address, options);
    } else {
      made.emplace(Communicator::from_environment(options));
    }
  }
  new (self) PyCommunicator(std::move(*made));
}

// The operation of stream= @p stream with the GIL released: @p op(std::nullopt) for None (the blocking
// form), else @p op(the stream) (the stream-ordered form), after which @p used (the call's tensors and
// host arrays) is kept until that stream gets past the call (under capture, until the next call's reap).
template <typename Op>
auto run(PyCommunicator& c, nb::handle stream, nb::object used, Op&& op) {
  const std::optional<cudaStream_t> s = stream_arg(stream);
  if (!s || !capturing(*s)) c.kept.reap();  // reaping queries events: never while capturing
  auto call = [&] {
    nb::gil_scoped_release gil;
    const std::lock_guard turn(c.busy);
    (void)c.live();
    return op(s);
  };
  if (!s) return call();
  // Kept whether or not the call throws: a stream-ordered call that threw may have queued work that uses
  // them all the same (a host operation's reduction, and the copies queued before its "queued" exchange).
  struct Keeper {
    PyCommunicator& c;
    cudaStream_t stream;
    nb::object& used;
    bool kept = false;
    void keep() {
      c.kept.keep(stream, std::span<const int>(&c.ordinal, 1), std::move(used));
      kept = true;
    }
    ~Keeper() {
      if (kept) return;
      try {
        keep();
      } catch (...) {  // the call's own error is the one to raise
      }
    }
  } keeper{c, *s, used};
  return call_then(call, [&] { keeper.keep(); });
}

void broadcast(PyCommunicator& c, std::uintptr_t buffer, std::size_t bytes, int root, nb::handle stream,
               nb::object used) {
  run(c, stream, std::move(used), [&](std::optional<cudaStream_t> s) {
    if (s) {
      c.comm->broadcast_async(pointer(buffer), bytes, root, *s);
    } else {
      c.comm->broadcast(pointer(buffer), bytes, root);
    }
  });
}

void all_gather(PyCommunicator& c, std::uintptr_t send, std::size_t bytes, std::uintptr_t recv,
                std::size_t capacity, nb::handle stream, nb::object used) {
  run(c, stream, std::move(used), [&](std::optional<cudaStream_t> s) {
    if (s) {
      c.comm->all_gather_async(pointer(send), bytes, pointer(recv), capacity, *s);
    } else {
      c.comm->all_gather(pointer(send), bytes, pointer(recv), capacity);
    }
  });
}

std::vector<GatherPiece> gather(PyCommunicator& c, std::uintptr_t send, std::size_t bytes,
                                std::uintptr_t recv, std::size_t capacity, int root, nb::handle stream,
                                nb::object used) {
  return run(c, stream, std::move(used), [&](std::optional<cudaStream_t> s) {
    return s ? c.comm->gather_async(pointer(send), bytes, pointer(recv), capacity, root, *s)
             : c.comm->gather(pointer(send), bytes, pointer(recv), capacity, root);
  });
}

void copy(PyCommunicator& c, int src, int dst, std::uintptr_t send, std::uintptr_t recv, std::size_t bytes,
          nb::handle stream, nb::object used) {
  run(c, stream, std::move(used), [&](std::optional<cudaStream_t> s) {
    if (s) {
      c.comm->copy_async(src, dst, pointer(send), pointer(recv), bytes, *s);
    } else {
      c.comm->copy(src, dst, pointer(send), pointer(recv), bytes);
    }
  });
}

// One PinnedArray per rank over the root's HostBuffers (views of its shared segment, no copy), None for
// a rank that sent nothing; an empty list off the root.
nb::list gather_to_host(PyCommunicator& c, std::uintptr_t send, std::size_t bytes, int root,
                        nb::handle stream, nb::object used) {
  std::vector<HostBuffer> buffers = run(c, stream, std::move(used), [&](std::optional<cudaStream_t> s) {
    return s ? c.comm->gather_to_host_async(pointer(send), bytes, root, *s)
             : c.comm->gather_to_host(pointer(send), bytes, root);
  });
  nb::list arrays;
  for (HostBuffer& b : buffers) arrays.append(host_array(std::move(b)));
  return arrays;
}

// @p data: the root's host bytes, None on the other ranks (and on a root with nothing to send); @p used:
// what a stream-ordered call keeps (data and the recv tensor).
void broadcast_from_host(PyCommunicator& c, nb::handle data, std::uintptr_t recv, std::size_t capacity,
                         int root, nb::handle stream, nb::object used) {
  const std::optional<HostView> view =
      data.is_none() ? std::nullopt : std::optional<HostView>(host_view(data, false));
  const std::span<const std::byte> bytes = view ? view->cspan() : std::span<const std::byte>{};
  // The export too: a resizable data (bytearray) must not move its bytes while the GPU may read them.
  if (view && !stream.is_none()) used = nb::make_tuple(used, view->exported());
  run(c, stream, std::move(used), [&](std::optional<cudaStream_t> s) {
    if (s) {
      c.comm->broadcast_from_host_async(bytes, pointer(recv), capacity, root, *s);
    } else {
      c.comm->broadcast_from_host(bytes, pointer(recv), capacity, root);
    }
  });
}

void synchronize(PyCommunicator& c, nb::handle stream) {
  const std::optional<cudaStream_t> s = stream_arg(stream);
  if (!s) {
    throw Error(Errc::invalid_argument,
                "synchronize: stream is required (a stream object or an int handle; 0 is the legacy default "
                "stream)");
  }
  {
    nb::gil_scoped_release gil;
    const std::lock_guard turn(c.busy);
    c.live().synchronize(*s);
  }
  c.kept.reap();
}

// Ends the communicator as its destruction would (its last operation waited for within the timeout, else
// NCCL aborted; the NCCL communicator finalised), then waits for the streams of what stream-ordered calls
// keep and lets go of it. Later calls raise; a second close does nothing.
void close(PyCommunicator& c) {
  {
    nb::gil_scoped_release gil;
    const std::lock_guard turn(c.busy);
    c.comm.reset();
  }
  c.kept.release();
}

}  // namespace

void bind_communicator(nb::module_& m) {
  nb::class_<PyCommunicator>(m, "_Communicator")
      .def("__init__", &init, nb::arg("rank").none(), nb::arg("world_size").none(), nb::arg("init_address"),
           nb::arg("device").none(), nb::arg("timeout_ms").none())
      .def_prop_ro("rank", [](const PyCommunicator& c) { return c.rank; })
      .def_prop_ro("world_size", [](const PyCommunicator& c) { return c.world_size; })
      .def_prop_ro("device", [](const PyCommunicator& c) { return c.ordinal; })
      .def_prop_ro("timeout", [](const PyCommunicator& c) { return c.timeout; })
      .def_prop_ro("closed", [](const PyCommunicator& c) { return !c.comm; })
      .def("close", &close,
           "Ends the communicator now (collective, as its end by garbage collection): waits (GIL released) for "
           "its last operation within the timeout, else aborts NCCL, finalises NCCL, then waits for the "
           "streams of the calls whose tensors it keeps. Later calls raise InvalidArgumentError; closing "
           "again does nothing.\n\n>>> comm.close()")
      .def("_broadcast", &broadcast, nb::arg("buffer"), nb::arg("nbytes"), nb::arg("root"),
           nb::arg("stream").none(), nb::arg("used").none())
      .def("_all_gather", &all_gather, nb::arg("send"), nb::arg("nbytes"), nb::arg("recv"),
           nb::arg("capacity"), nb::arg("stream").none(), nb::arg("used").none())
      .def("_gather", &gather, nb::arg("send"), nb::arg("nbytes"), nb::arg("recv"), nb::arg("capacity"),
           nb::arg("root"), nb::arg("stream").none(), nb::arg("used").none())
      .def("_copy", &copy, nb::arg("src"), nb::arg("dst"), nb::arg("send"), nb::arg("recv"),
           nb::arg("nbytes"), nb::arg("stream").none(), nb::arg("used").none())
      .def("_gather_to_host", &gather_to_host, nb::arg("send"), nb::arg("nbytes"), nb::arg("root"),
           nb::arg("stream").none(), nb::arg("used").none())
      .def("_broadcast_from_host", &broadcast_from_host, nb::arg("data").none(), nb::arg("recv"),
           nb::arg("capacity"), nb::arg("root"), nb::arg("stream").none(), nb::arg("used").none())
      .def("synchronize", &synchronize, nb::arg("stream").none(),
           "Waits (GIL released) until stream's work queued so far is done, at most the timeout, polling "
           "NCCL's asynchronous error: the bounded wait for the stream-ordered forms.\n\n"
           ">>> comm.broadcast(x, 0, stream=s)\n>>> comm.synchronize(s)")
      .def_prop_ro(
          "_kept",
          [](PyCommunicator& c) {
            c.kept.reap();
            return c.kept.size();
          },
          "How many stream-ordered calls still keep what they use (their streams not past them yet)");
}

}  // namespace gpuxfer::python
