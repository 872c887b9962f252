// _copy_blocks: gpuxfer::copy_blocks with the GIL released. The regions and the pairs arrive as
// addresses and strides from gpuxfer/_blocks.py, which reads tensors without copying them.
#include <cstdint>
#include <string>
#include <tuple>

#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <gpuxfer/block_copy.hpp>
#include <gpuxfer/error.hpp>

#include "bindings.hpp"

namespace gpuxfer::python {
namespace {

using Layout = std::tuple<std::uintptr_t, std::size_t, std::size_t, std::size_t>;  // base, blocks, strides

BlockPath path_of(const std::string& name) {
  if (name == "automatic" || name == "auto") return BlockPath::automatic;
  if (name == "copy_engine") return BlockPath::copy_engine;
  if (name == "batch") return BlockPath::batch;
  if (name == "kernel") return BlockPath::kernel;
  throw Error(Errc::invalid_argument,
              "copy_blocks: path '" + name + "' is none of automatic, copy_engine, batch, kernel");
}

BlockLayout layout_of(const Layout& l) {
  const auto [base, blocks, block_stride, layer_stride] = l;
  return {reinterpret_cast<void*>(base), blocks, block_stride, layer_stride};
}

// @p stream: a cudaStream_t as an int for the stream-ordered form, -1 for the blocking one.
std::string copy_blocks_binding(const Layout& src, const Layout& dst, std::uintptr_t pairs, std::size_t count,
                                std::size_t block_bytes, std::size_t layers, std::int64_t stream,
                                const std::string& path, std::uintptr_t error_flag) {
  BlockCopy c{layout_of(src), layout_of(dst), reinterpret_cast<const std::int64_t*>(pairs),
              count,          block_bytes,    layers};
  c.error_flag = reinterpret_cast<std::uint32_t*>(error_flag);
  c.path = path_of(path);
  BlockPath taken;
  {
    nb::gil_scoped_release gil;
    taken = stream < 0
                ? copy_blocks(c)
                : copy_blocks_async(c, reinterpret_cast<cudaStream_t>(static_cast<std::uintptr_t>(stream)));
  }
  return to_string(taken);
}

}  // namespace

void bind_blocks(nb::module_& m) {
  m.def("_copy_blocks", &copy_blocks_binding, nb::arg("src"), nb::arg("dst"), nb::arg("pairs"),
        nb::arg("count"), nb::arg("block_bytes"), nb::arg("layers"), nb::arg("stream"), nb::arg("path"),
        nb::arg("error_flag"),
        "gpuxfer::copy_blocks (stream < 0) or copy_blocks_async; returns the path taken");
}

}  // namespace gpuxfer::python
