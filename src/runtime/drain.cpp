#include "runtime/drain.hpp"

namespace gpuxfer::detail {

DrainOnError::~DrainOnError() {
  if (std::uncaught_exceptions() <= exceptions_) return;
  for (cudaStream_t stream : streams_) (void)cudaStreamSynchronize(stream);
  (void)cudaGetLastError();
}

}  // namespace gpuxfer::detail
