#include "ops.hpp"

#include <algorithm>
#include <iterator>
#include <set>

#include <nccl.h>

#include <gpuxfer/error.hpp>

namespace gpuxfer::bench {

const char* to_string(Kind kind) noexcept {
  static constexpr const char* names[] = {"ceiling", "gpuxfer", "naive", "baseline"};  // in Kind's order
  const auto index = static_cast<std::size_t>(kind);
  return index < std::size(names) ? names[index] : "?";
}

std::size_t bytes_all_devices(std::size_t size, std::size_t devices) { return size * devices; }

std::size_t bytes_payload(std::size_t size, std::size_t /*devices*/) { return size; }

std::optional<std::string> needs_two_devices(Bench& b) {
  if (b.devices() >= 2) return std::nullopt;
  return "needs 2 devices, " + std::to_string(b.devices()) + " under test";
}

std::optional<std::string> needs_peer_access(Bench& b) {
  if (auto two = needs_two_devices(b)) return two;
  if (b.manager().peer_enabled(0, 1)) return std::nullopt;
  return std::string("no peer access between devices 0 and 1 (link ") +
         std::string(to_string(b.manager().link(0, 1))) + ")";
}

std::optional<std::string> needs_nccl(Bench& b) {
  if (auto two = needs_two_devices(b)) return two;
  if (!b.manager().nccl_available()) {
    return std::string("NCCL is ") +
           (b.manager().options().enable_nccl ? "not available" : "disabled (GPUXFER_NCCL)");
  }
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return std::string("ncclGetVersion failed");
  return std::nullopt;
}

const std::vector<OpSpec>& all_ops() {
  static const std::vector<OpSpec> ops = [] {
    std::vector<OpSpec> all;
    for (auto family : {ceiling_ops, gather_ops, copy_ops, broadcast_ops, small_gather_ops, block_ops}) {
      for (OpSpec& op : family()) all.push_back(std::move(op));
    }
    return all;
  }();
  return ops;
}

std::vector<const OpSpec*> select_ops(const std::vector<std::string>& names) {
  const std::vector<OpSpec>& ops = all_ops();
  auto find = [&](const std::string& name) -> const OpSpec* {
    for (const OpSpec& op : ops) {
      if (op.name == name) return &op;
    }
    return nullptr;
  };
  std::set<std::string> wanted;
  std::vector<std::string> todo;
  for (const std::string& name : names) {
    if (name.empty() || name.back() != '*') {
      todo.push_back(name);
      continue;
    }
    const std::string prefix = name.substr(0, name.size() - 1);
    const std::size_t before = todo.size();
    for (const OpSpec& op : ops) {
      if (op.name.starts_with(prefix)) todo.push_back(op.name);
    }
    if (todo.size() == before) todo.push_back(name);  // unknown: reported below
  }
  if (names.empty()) {
    for (const OpSpec& op : ops) todo.push_back(op.name);
  }
  while (!todo.empty()) {
    const std::string name = todo.back();
    todo.pop_back();
    const OpSpec* op = find(name);
    if (op == nullptr) {
      std::string known;
      for (const OpSpec& o : ops) known += (known.empty() ? "" : ",") + o.name;
      throw Error(Errc::invalid_option, "--ops: unknown operation '" + name + "'; known: " + known);
    }
    if (wanted.insert(name).second) {
      for (const std::string& c : op->ceiling) todo.push_back(c);
      if (!op->bound.empty()) todo.push_back(op->bound);
      if (!op->stream_bound.empty()) todo.push_back(op->stream_bound);
      if (!op->overlap_bound.empty()) todo.push_back(op->overlap_bound);
    }
  }
  std::vector<const OpSpec*> selected;
  for (const OpSpec& op : ops) {
    if (wanted.count(op.name) != 0) selected.push_back(&op);
  }
  return selected;
}

}  // namespace gpuxfer::bench
