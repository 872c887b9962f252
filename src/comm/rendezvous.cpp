#include "comm/rendezvous.hpp"

#include <gpuxfer/error.hpp>

#include "comm/file_rendezvous.hpp"
#include "comm/tcp_rendezvous.hpp"

namespace gpuxfer::detail {

std::string exchange_blob(const LaunchEnv& env, const std::string& blob) {
  if (env.world_size == 1) return blob;
  switch (env.init.kind) {
    case InitAddress::Kind::tcp:
      if (env.rank == 0) {
        serve_tcp_rendezvous(env, blob);
        return blob;
      }
      return join_tcp_rendezvous(env);
    case InitAddress::Kind::file:
      return file_rendezvous(env, blob);
    case InitAddress::Kind::none:
      break;
  }
  throw Error(Errc::invalid_option,
              "a world of " + std::to_string(env.world_size) +
                  " ranks needs a rendezvous address: set GPUXFER_INIT or MASTER_ADDR/MASTER_PORT");
}

}  // namespace gpuxfer::detail
