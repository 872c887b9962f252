// The one way gpuxfer cleans up after a failure half-way through queuing an operation.
#pragma once

#include <exception>
#include <vector>

#include <cuda_runtime_api.h>

namespace gpuxfer::detail {

/// Drains, when the scope is left by an exception, every stream added to it: copies already queued
/// into staging or caller memory finish before that memory goes back to the pool or to the caller.
/// Declare it after the staging it protects, so that it runs first. A stream that captures a graph is
/// skipped: nothing of it runs. Errors of the drain are dropped: the exception in flight says what went wrong.
class DrainOnError {
 public:
  DrainOnError() noexcept : exceptions_(std::uncaught_exceptions()) {}
  ~DrainOnError();
  DrainOnError(const DrainOnError&) = delete;
  DrainOnError& operator=(const DrainOnError&) = delete;

  /// Drain @p stream too, should the scope fail. @throws std::bad_alloc
  void add(cudaStream_t stream) { streams_.push_back(stream); }

 private:
  int exceptions_;
  std::vector<cudaStream_t> streams_;
};

}  // namespace gpuxfer::detail
