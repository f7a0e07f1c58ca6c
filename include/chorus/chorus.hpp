// A thin C++ layer over the C API (chorus.h): communicators that destroy
// themselves, and results that carry the error message. It adds no
// behaviour; every call is one C call. No exceptions: check the ApiResult.
#pragma once

#include <chorus/chorus.h>

#include <string>
#include <utility>
#include <vector>

namespace chorus {

struct ApiResult {
  chorusResult_t code = chorusSuccess;
  std::string message;  // chorusGetLastError() when code != chorusSuccess
  bool ok() const { return code == chorusSuccess; }
};

inline ApiResult check(chorusResult_t code) {
  if (code == chorusSuccess) return {};
  return {code, chorusGetLastError(nullptr)};
}

class Comm {
 public:
  Comm() = default;
  explicit Comm(chorusComm_t c) : c_(c) {}
  Comm(Comm&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
  Comm& operator=(Comm&& o) noexcept {
    if (this != &o) {
      reset();
      c_ = std::exchange(o.c_, nullptr);
    }
    return *this;
  }
  ~Comm() { reset(); }

  // `n` ranks as threads of this process.
  static ApiResult initAll(int n, std::vector<Comm>* comms) {
    std::vector<chorusComm_t> raw(static_cast<size_t>(n), nullptr);
    ApiResult r = check(chorusCommInitAll(raw.data(), n, nullptr));
    if (!r.ok()) return r;
    comms->clear();
    for (chorusComm_t c : raw) comms->emplace_back(c);
    return r;
  }

  chorusComm_t get() const { return c_; }
  int rank() const {
    int r = -1;
    chorusCommUserRank(c_, &r);
    return r;
  }
  int size() const {
    int n = 0;
    chorusCommCount(c_, &n);
    return n;
  }

  ApiResult allReduce(const void* send, void* recv, size_t count, chorusDataType_t t,
                      chorusRedOp_t op) const {
    return check(chorusAllReduce(send, recv, count, t, op, c_, nullptr));
  }
  ApiResult allGather(const void* send, void* recv, size_t sendcount, chorusDataType_t t) const {
    return check(chorusAllGather(send, recv, sendcount, t, c_, nullptr));
  }
  ApiResult reduceScatter(const void* send, void* recv, size_t recvcount, chorusDataType_t t,
                          chorusRedOp_t op) const {
    return check(chorusReduceScatter(send, recv, recvcount, t, op, c_, nullptr));
  }
  ApiResult allToAll(const void* send, void* recv, size_t count, chorusDataType_t t) const {
    return check(chorusAllToAll(send, recv, count, t, c_, nullptr));
  }
  ApiResult broadcast(const void* send, void* recv, size_t count, chorusDataType_t t,
                      int root) const {
    return check(chorusBroadcast(send, recv, count, t, root, c_, nullptr));
  }
  ApiResult reduce(const void* send, void* recv, size_t count, chorusDataType_t t, chorusRedOp_t op,
                   int root) const {
    return check(chorusReduce(send, recv, count, t, op, root, c_, nullptr));
  }
  ApiResult gather(const void* send, void* recv, size_t count, chorusDataType_t t, int root) const {
    return check(chorusGather(send, recv, count, t, root, c_, nullptr));
  }
  ApiResult scatter(const void* send, void* recv, size_t count, chorusDataType_t t,
                    int root) const {
    return check(chorusScatter(send, recv, count, t, root, c_, nullptr));
  }
  ApiResult send(const void* buf, size_t count, chorusDataType_t t, int peer) const {
    return check(chorusSend(buf, count, t, peer, c_, nullptr));
  }
  ApiResult recv(void* buf, size_t count, chorusDataType_t t, int peer) const {
    return check(chorusRecv(buf, count, t, peer, c_, nullptr));
  }
  ApiResult runAlgo(chorusAlgoHandle_t algo, const void* send, void* recv, size_t count,
                    chorusDataType_t t, chorusRedOp_t op, int root = 0) const {
    return check(chorusRunAlgo(send, recv, count, t, op, root, algo, c_, nullptr));
  }

 private:
  void reset() {
    if (c_ != nullptr) chorusCommDestroy(c_);
    c_ = nullptr;
  }
  chorusComm_t c_ = nullptr;
};

}  // namespace chorus
