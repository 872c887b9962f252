/// @file gpuxfer.hpp
/// @brief Everything gpuxfer offers, in one include.
#pragma once

#include <gpuxfer/block_copy.hpp>
#include <gpuxfer/buffer_ranges.hpp>
#include <gpuxfer/communicator.hpp>
#include <gpuxfer/device_info.hpp>
#include <gpuxfer/error.hpp>
#include <gpuxfer/host_buffer.hpp>
#include <gpuxfer/host_registration.hpp>
#include <gpuxfer/inter_gpu_transfer.hpp>
#include <gpuxfer/multi_gpu_manager.hpp>
#include <gpuxfer/options.hpp>
#include <gpuxfer/pinned_pool.hpp>
#include <gpuxfer/transfer_handle.hpp>
#include <gpuxfer/transfer_paths.hpp>
#include <gpuxfer/version.hpp>
