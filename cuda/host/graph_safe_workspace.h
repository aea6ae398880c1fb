// The CUDA backend's own workspace, kept valid for the CUDA graphs that captured calls using it.
//
// A call captured into a graph bakes the workspace's address into the graph, and every replay
// writes there again, long after the call returned. So once a captured call has used a buffer,
// the buffer is never freed while the workspace lives: when a later call needs more, it is
// retired (kept, unused) and a larger one allocated, and the graph's replays keep writing into
// memory nobody else owns. A buffer no capture used is freed on growth as before, once the
// device is idle (queued work may still read it). While the call's stream captures, the
// workspace cannot grow at all: an allocation or a device-wide synchronisation inside a capture
// invalidates it, so the call is refused with the remedy in the message.
//
// Host-only and allocator-agnostic (tests/internal/test_graph_safe_workspace.cpp drives it with
// a fake buffer): Buffer has resize(bytes), get(), size() and a move constructor that leaves the
// source empty.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace int8attn {

template <typename Buffer>
class GraphSafeWorkspace {
 public:
  // At least `bytes` for a call whose stream (the argument `stream_arg` names) is
  // (`capturing`) or is not being captured into a CUDA graph. `wait_idle()` returns once no
  // queued work may still use the current buffer; it runs only before such a buffer is freed.
  // The pointer stays valid until the next call that grows the workspace, and for graphs that
  // captured it, until the workspace is destroyed.
  template <typename WaitIdle>
  void* get(size_t bytes, bool capturing, const char* stream_arg, WaitIdle&& wait_idle) {
    if (bytes > current_.size()) {
      if (capturing) {
        throw Error(INT8ATTN_ERROR_WORKSPACE_TOO_SMALL,
                    std::string(stream_arg) + " is capturing a CUDA graph and this call needs " +
                        std::to_string(bytes) + " bytes of the context's workspace, which holds " +
                        std::to_string(current_.size()) +
                        " (it cannot grow during a capture: an allocation would invalidate it); "
                        "run the call once before capturing, or reserve the workspace "
                        "(int8attn_context_reserve_workspace; a forward call's size: "
                        "int8attn_forward_workspace_size)");
      }
      if (captured_) {
        retired_.push_back(std::move(current_));
        captured_ = false;
      } else if (current_.size() > 0) {
        wait_idle();
      }
      current_.resize(bytes + bytes / 4);
    }
    if (capturing && bytes > 0) captured_ = true;
    return current_.get();
  }

  size_t size() const { return current_.size(); }
  // The current buffer (null before the first allocation).
  void* data() const { return current_.get(); }
  // Bytes held for graphs only: buffers captured calls used before the workspace grew.
  size_t retired_bytes() const {
    size_t n = 0;
    for (const Buffer& b : retired_) n += b.size();
    return n;
  }

 private:
  Buffer current_;
  bool captured_ = false;  // a captured call used current_
  std::vector<Buffer> retired_;
};

}  // namespace int8attn
