// The CUDA backend's workspace under CUDA-graph capture (cuda/host/graph_safe_workspace.h),
// driven by a fake buffer that logs its allocations and frees: a buffer a captured call used
// is never freed, a grown buffer no capture used is freed after the device is idle, and a
// capture that needs more room is refused without allocating.
#include "cuda/host/graph_safe_workspace.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace int8attn {
namespace {

// What happened to the fake buffers, in order: "alloc N" and "free N" by size, "idle".
std::vector<std::string> g_log;

class FakeBuffer {
 public:
  FakeBuffer() = default;
  ~FakeBuffer() { release(); }
  FakeBuffer(const FakeBuffer&) = delete;
  FakeBuffer& operator=(const FakeBuffer&) = delete;
  FakeBuffer(FakeBuffer&& o) noexcept
      : storage_(std::move(o.storage_)), bytes_(std::exchange(o.bytes_, 0)) {}
  void resize(size_t bytes) {
    release();
    storage_.assign(bytes, 0);
    bytes_ = bytes;
    g_log.push_back("alloc " + std::to_string(bytes));
  }
  void* get() const { return bytes_ > 0 ? const_cast<unsigned char*>(storage_.data()) : nullptr; }
  size_t size() const { return bytes_; }

 private:
  void release() {
    if (bytes_ > 0) g_log.push_back("free " + std::to_string(bytes_));
    storage_.clear();
    bytes_ = 0;
  }
  std::vector<unsigned char> storage_;
  size_t bytes_ = 0;
};

auto idle() {
  return [] { g_log.push_back("idle"); };
}

class GraphSafeWorkspaceTest : public ::testing::Test {
 protected:
  void SetUp() override { g_log.clear(); }
};

TEST_F(GraphSafeWorkspaceTest, GrowsWithHeadroomAndFreesAfterIdleWithoutCaptures) {
  GraphSafeWorkspace<FakeBuffer> ws;
  void* a = ws.get(100, false, "params->stream", idle());
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(ws.size(), 125u);                                  // a quarter of headroom
  EXPECT_EQ(ws.get(125, false, "params->stream", idle()), a);  // fits: no new allocation
  ws.get(400, false, "params->stream", idle());
  EXPECT_EQ(ws.size(), 500u);
  EXPECT_EQ(ws.retired_bytes(), 0u);
  // The first allocation frees nothing, so it waits for nothing; every free follows an idle.
  const std::vector<std::string> want = {"alloc 125", "idle", "free 125", "alloc 500"};
  EXPECT_EQ(g_log, want);
}

TEST_F(GraphSafeWorkspaceTest, ACapturedBufferIsRetiredNotFreed) {
  GraphSafeWorkspace<FakeBuffer> ws;
  ws.get(100, false, "params->stream", idle());  // eager warm-up call
  void* captured = ws.get(100, true, "params->stream", idle());
  ASSERT_NE(captured, nullptr);
  g_log.clear();
  // A later, larger eager call: the graph still writes into `captured` on every replay.
  void* grown = ws.get(1000, false, "params->stream", idle());
  EXPECT_NE(grown, captured);
  EXPECT_EQ(ws.retired_bytes(), 125u);
  const std::vector<std::string> want = {"alloc 1250"};  // no free, and no wait: nothing freed
  EXPECT_EQ(g_log, want);
  // The retired buffer is still there, writable.
  static_cast<unsigned char*>(captured)[124] = 7;
  // The new buffer was not captured: growing it again frees it (after the device is idle).
  g_log.clear();
  ws.get(2000, false, "params->stream", idle());
  const std::vector<std::string> want2 = {"idle", "free 1250", "alloc 2500"};
  EXPECT_EQ(g_log, want2);
  EXPECT_EQ(ws.retired_bytes(), 125u);
}

TEST_F(GraphSafeWorkspaceTest, ACaptureThatNeedsMoreRoomIsRefusedWithoutAllocating) {
  GraphSafeWorkspace<FakeBuffer> ws;
  void* a = ws.get(100, false, "params->stream", idle());
  g_log.clear();
  try {
    ws.get(1000, true, "stream", idle());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), INT8ATTN_ERROR_WORKSPACE_TOO_SMALL);
    const std::string m = e.what();
    EXPECT_NE(m.find("stream is capturing a CUDA graph"), std::string::npos) << m;
    EXPECT_NE(m.find("needs 1000 bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("holds 125"), std::string::npos) << m;
    EXPECT_NE(m.find("int8attn_context_reserve_workspace"), std::string::npos) << m;
  }
  EXPECT_TRUE(g_log.empty());  // neither an allocation nor a wait inside the capture
  EXPECT_EQ(ws.size(), 125u);
  // The refused capture did not mark the buffer: an eager growth frees it as usual.
  EXPECT_EQ(ws.get(100, false, "params->stream", idle()), a);
  ws.get(1000, false, "params->stream", idle());
  EXPECT_EQ(ws.retired_bytes(), 0u);
}

TEST_F(GraphSafeWorkspaceTest, AnEmptyWorkspaceCannotGrowDuringACapture) {
  GraphSafeWorkspace<FakeBuffer> ws;
  EXPECT_THROW(ws.get(64, true, "params->stream", idle()), Error);
  EXPECT_TRUE(g_log.empty());
  EXPECT_EQ(ws.size(), 0u);
}

TEST_F(GraphSafeWorkspaceTest, EveryCapturedBufferIsKept) {
  GraphSafeWorkspace<FakeBuffer> ws;
  std::vector<void*> captured;
  size_t need = 100;
  for (int i = 0; i < 3; ++i, need *= 4) {
    ws.get(need, false, "params->stream", idle());
    captured.push_back(ws.get(need, true, "params->stream", idle()));
  }
  ws.get(need, false, "params->stream", idle());
  EXPECT_EQ(ws.retired_bytes(), 125u + 500u + 2000u);
  for (const std::string& line : g_log) EXPECT_EQ(line.rfind("free", 0), std::string::npos) << line;
}

}  // namespace
}  // namespace int8attn
